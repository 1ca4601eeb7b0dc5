package manager

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/kube"
)

// internEndpoint interns the repeated strings of a cached Endpoint beyond its
// metadata: its type, check kind and path, sync phase and conditions, app.
func internEndpoint(obj any) {
	ep, ok := obj.(*v1.Endpoint)
	if !ok {
		return
	}
	s := kube.Strings
	ep.APIVersion, ep.Kind = s.Intern(ep.APIVersion), s.Intern(ep.Kind)
	ep.Spec.Kind, ep.Spec.Path = s.Intern(ep.Spec.Kind), s.Intern(ep.Spec.Path)
	ep.Spec.K8sAppName, ep.Status.K8sAppName = s.Intern(ep.Spec.K8sAppName), s.Intern(ep.Status.K8sAppName)
	ep.Status.Phase = s.Intern(ep.Status.Phase)
	for i := range ep.Status.Conditions {
		c := &ep.Status.Conditions[i]
		c.Type, c.Reason = s.Intern(c.Type), s.Intern(c.Reason)
		c.Status = metav1.ConditionStatus(s.Intern(string(c.Status)))
	}
	if m := ep.Status.Monitoring; m != nil {
		m.State, m.ErrorName, m.ErrorCategory = s.Intern(m.State), s.Intern(m.ErrorName), s.Intern(m.ErrorCategory)
	}
}

// internIngress interns the repeated strings of a cached Ingress beyond its
// metadata: its type, class, path types and backends.
func internIngress(obj any) {
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok {
		return
	}
	s := kube.Strings
	ing.APIVersion, ing.Kind = s.Intern(ing.APIVersion), s.Intern(ing.Kind)
	if c := ing.Spec.IngressClassName; c != nil {
		*c = s.Intern(*c)
	}
	for i := range ing.Spec.Rules {
		if h := ing.Spec.Rules[i].HTTP; h != nil {
			for j := range h.Paths {
				p := &h.Paths[j]
				p.Path = s.Intern(p.Path)
				if p.PathType != nil {
					*p.PathType = networkingv1.PathType(s.Intern(string(*p.PathType)))
				}
				if svc := p.Backend.Service; svc != nil {
					svc.Name, svc.Port.Name = s.Intern(svc.Name), s.Intern(svc.Port.Name)
				}
			}
		}
	}
}
