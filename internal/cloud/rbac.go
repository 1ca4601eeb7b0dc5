package cloud

import rbacv1 "k8s.io/api/rbac/v1"

// ClusterRoleRules are what the cloud controller needs beyond the operator's own
// role, granted by the chart only with cloudController.enabled (hack/gen-chart
// writes them to the chart's files/cloud-controller-rules.yaml; the cloud suite
// runs the operator with nothing but the chart's RBAC):
//   - the cloud-node controller updates a Node (providerID, region labels, the
//     taint: nodes update, patch) and its addresses (nodes/status patch);
//   - the service controller watches Services and patches their finalizer and
//     load balancer status through the status subresource (services/status patch);
//   - both record events through client-go's core/v1 event sink.
var ClusterRoleRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"services/status"}, Verbs: []string{"patch"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
}
