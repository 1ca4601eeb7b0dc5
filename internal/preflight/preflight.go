// Package preflight is seed 004's checklist for a provided cluster ("Was der
// Cluster mitbringen muss") as checks with a verdict per row: what the row asks
// for (Soll), what the cluster shows (Ist), the verdict, and for a miss the
// seed's consequence ("Wenn es fehlt"). A row the cluster cannot answer (the jump
// host, a machine's clock it cannot see) says unknown and why — never a guess.
package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	rbacfiles "github.com/polycrate/polycrate-operator/config/rbac"
)

// defaultScheme reads core, apiextensions and the operator's kinds; built on
// first use, for a Checker without a Scheme (the CLI). The running operator
// passes its manager's scheme: a scheme of every Kubernetes kind is about
// 0.7 MiB of heap, kept for the life of the process.
var defaultScheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	_ = v1.AddToScheme(s)
	return s
})

// Verdict is a row's outcome.
type Verdict string

// The verdicts.
const (
	OK      Verdict = "ok"
	Missing Verdict = "missing"
	Warning Verdict = "warning"
	Unknown Verdict = "unknown"
)

// Row is one line of the checklist.
type Row struct {
	Topic   string  `json:"topic"`
	Target  string  `json:"target"` // Soll
	Found   string  `json:"found"`  // Ist
	Verdict Verdict `json:"verdict"`
	// Consequence is the seed's "Wenn es fehlt", set on a miss or warning.
	Consequence string `json:"consequence,omitempty"`
	// Hard rows fail the command when missing.
	Hard bool `json:"hard"`
}

// Report is every row and a summary line.
type Report struct {
	Summary   string    `json:"summary"`
	CheckedAt time.Time `json:"checked_at"`
	Rows      []Row     `json:"rows"`
}

// Failed reports whether a hard requirement is missing.
func (r *Report) Failed() bool {
	for _, row := range r.Rows {
		if row.Hard && row.Verdict == Missing {
			return true
		}
	}
	return false
}

// Options tune the checks.
type Options struct {
	// MinVersion is the lowest Kubernetes version the packages are tested with
	// (default 1.27, the seed's "typisch 1.27+").
	MinVersion string
	// Namespace is where the workloads go (rights, pull secrets; default "default").
	Namespace string
	// OperatorNamespace is where the operator's namespaced Role applies (default
	// "polycrate").
	OperatorNamespace string
	// Profiles are the rights to check: "deploy" (namespaces, Deployments, CRDs:
	// the seed's row) and "operator" (this operator's own RBAC). Default both.
	Profiles []string
	// PullSecrets are the registry pull secrets the team agreed on; they must
	// exist in Namespace and be on its default ServiceAccount.
	PullSecrets []string
	// SecretNamespaces: the operator was granted Secrets in these namespaces only
	// (run --secret-namespaces, chart value rbac.secretNamespaces): its Secret
	// rights are checked there instead of cluster-wide.
	SecretNamespaces []string
	// RegistryMirror names the mirror the team agreed on (reported; the cluster
	// cannot show a node's containerd mirror configuration).
	RegistryMirror string
	// Now is the clock (tests).
	Now func() time.Time
}

// The seed's rows: target and consequence.
var seedRows = map[string][2]string{
	"Kubernetes API":     {"reachable, a version the packages are tested with (%s+)", "kein Deploy (no deployment)"},
	"Rights":             {"create namespaces, Deployments, the CRDs of the chosen operators; no silent cluster-admin", "Overlay explodiert (the overlay breaks); kein stilles Cluster-Admin"},
	"CNI":                {"a working pod network; NetworkPolicies enforced", "Cilium nur mit Zustimmung — CNI-Wechsel ist ein Cluster-Eingriff (changing the CNI is an intervention in the cluster)"},
	"CSI / StorageClass": {"RWO (and RWX where needed) under a documented name; a default class", "Stateful Workloads nicht starten (stateful workloads do not start)"},
	"Ingress or Gateway": {"HTTP(S) into the namespaces, or the right to install a controller", "Ingress (install the Ingress primitive block)"},
	"DNS and NTP":        {"reliable cluster DNS and node clocks on all nodes", "Zertifikate, Tokens, Logs laufen schief (certificates, tokens and logs go wrong)"},
	"Object storage":     {"S3-compatible storage outside the node disks for Velero/database backups", "Object Storage — Backup auf demselben Volume ist kein DR (a backup on the same volume is no disaster recovery)"},
	"Registry pull":      {"images from the agreed registry, or a mirror in the network", "Harbor · Registry-Proxy (install a registry or a pull-through proxy)"},
	"Jump host":          {"Linux (or equivalent) with Docker, kubectl and the Polycrate CLI image", "Air-Gap- und Action-Lauf unmöglich (no air-gapped or action runs)"},
}

func row(topic string, hard bool, minVersion string) Row {
	s := seedRows[topic]
	target := s[0]
	if strings.Contains(target, "%s") {
		target = fmt.Sprintf(target, minVersion)
	}
	return Row{Topic: topic, Target: target, Hard: hard, Consequence: s[1]}
}

func (r *Row) set(v Verdict, found string) {
	r.Verdict, r.Found = v, found
}

// Checker runs the checks against one cluster.
type Checker struct {
	Config *rest.Config
	Opts   Options
	// Client is built from Config (with room for the rights' access reviews:
	// 50 requests per second) when nil, with Scheme (when nil, one of core,
	// apiextensions and the operator's kinds).
	Client client.Client
	Scheme *runtime.Scheme
}

// Run runs every check.
func (c *Checker) Run(ctx context.Context) *Report {
	if c.Client == nil {
		cfg := rest.CopyConfig(c.Config)
		if cfg.QPS < 50 {
			cfg.QPS, cfg.Burst = 50, 100
		}
		sch := c.Scheme
		if sch == nil {
			sch = defaultScheme()
		}
		cl, err := client.New(cfg, client.Options{Scheme: sch})
		if err != nil {
			r := row("Kubernetes API", true, c.Opts.MinVersion)
			r.set(Missing, "unreachable: "+err.Error())
			rep := &Report{Rows: []Row{r}}
			rep.Summary = summarize(rep)
			return rep
		}
		c.Client = cl
	}
	o := c.Opts
	if o.MinVersion == "" {
		o.MinVersion = "1.27"
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.OperatorNamespace == "" {
		o.OperatorNamespace = "polycrate"
	}
	if len(o.Profiles) == 0 {
		o.Profiles = []string{"deploy", "operator"}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c.Opts = o
	rep := &Report{CheckedAt: o.Now().UTC()}
	serverTime, api := c.api(ctx)
	rep.Rows = append(rep.Rows, api)
	if api.Verdict == Missing && strings.HasPrefix(api.Found, "unreachable") {
		for _, t := range []string{"Rights", "CNI", "CSI / StorageClass", "Ingress or Gateway", "DNS and NTP", "Object storage", "Registry pull"} {
			r := row(t, false, o.MinVersion)
			r.set(Unknown, "the Kubernetes API is unreachable")
			rep.Rows = append(rep.Rows, r)
		}
	} else {
		rep.Rows = append(rep.Rows, c.rights(ctx), c.cni(ctx), c.storage(ctx), c.ingress(ctx), c.dnsAndTime(ctx, serverTime),
			c.objectStorage(ctx), c.registry(ctx))
	}
	jump := row("Jump host", false, o.MinVersion)
	jump.set(Unknown, "not visible from the cluster: check the jump host itself (docker, kubectl, the Polycrate CLI image)")
	rep.Rows = append(rep.Rows, jump)
	for i := range rep.Rows {
		if rep.Rows[i].Verdict == OK || rep.Rows[i].Verdict == Unknown {
			rep.Rows[i].Consequence = ""
		}
	}
	rep.Summary = summarize(rep)
	return rep
}

func summarize(rep *Report) string {
	counts := map[Verdict]int{}
	var hard []string
	for _, r := range rep.Rows {
		counts[r.Verdict]++
		if r.Hard && r.Verdict == Missing {
			hard = append(hard, r.Topic)
		}
	}
	s := fmt.Sprintf("preflight: %d ok, %d warning, %d missing, %d unknown", counts[OK], counts[Warning], counts[Missing], counts[Unknown])
	if len(hard) > 0 {
		return s + " — hard requirements missing: " + strings.Join(hard, ", ")
	}
	return s + " — every hard requirement holds"
}

// api reads /version (and the server's clock from the answer's Date header).
func (c *Checker) api(ctx context.Context) (time.Time, Row) {
	r := row("Kubernetes API", true, c.Opts.MinVersion)
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		r.set(Missing, "unreachable: "+err.Error())
		return time.Time{}, r
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.Config.Host, "/")+"/version", nil)
	resp, err := hc.Do(req)
	if err != nil {
		r.set(Missing, "unreachable: "+err.Error())
		return time.Time{}, r
	}
	defer resp.Body.Close()
	var info struct {
		GitVersion string `json:"gitVersion"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil {
		r.set(Missing, fmt.Sprintf("unreachable: /version answered %d", resp.StatusCode))
		return time.Time{}, r
	}
	serverTime, _ := http.ParseTime(resp.Header.Get("Date"))
	have, err1 := version.ParseGeneric(info.GitVersion)
	want, err2 := version.ParseGeneric(c.Opts.MinVersion)
	switch {
	case err1 != nil || err2 != nil:
		r.set(Warning, "version "+info.GitVersion+" cannot be compared with "+c.Opts.MinVersion)
	case have.LessThan(want):
		r.set(Missing, fmt.Sprintf("reachable, version %s: older than %s", info.GitVersion, c.Opts.MinVersion))
	default:
		r.set(OK, "reachable, version "+info.GitVersion)
	}
	return serverTime, r
}

// access is one right to check.
type access struct {
	group, resource, verb, namespace string
	profile                          string
}

func (a access) String() string {
	res := a.resource
	if a.group != "" {
		res += "." + a.group
	}
	return a.verb + " " + res
}

// rightsOf are the profile's rights.
func rightsOf(profile, namespace, operatorNamespace string, secretNamespaces []string) ([]access, error) {
	switch profile {
	case "deploy":
		return []access{{"", "namespaces", "create", "", profile}, {"apps", "deployments", "create", namespace, profile},
			{"apiextensions.k8s.io", "customresourcedefinitions", "create", "", profile}}, nil
	case "operator", "cloud-controller":
		raw := rbacfiles.Role
		if profile == "cloud-controller" {
			raw = rbacfiles.CloudControllerRole
		}
		var out []access
		for _, doc := range strings.Split(string(raw), "\n---") {
			var role struct {
				Kind     string                     `json:"kind"`
				Metadata struct{ Namespace string } `json:"metadata"`
				Rules    []rbacv1.PolicyRule        `json:"rules"`
			}
			if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
				return nil, err
			}
			for _, rule := range role.Rules {
				if len(rule.ResourceNames) > 0 {
					continue // a named object: checked by the operator's own use
				}
				for _, g := range rule.APIGroups {
					for _, res := range rule.Resources {
						for _, v := range rule.Verbs {
							ns := ""
							if role.Kind == "Role" {
								ns = operatorNamespace
							}
							if ns == "" && g == "" && res == "secrets" && len(secretNamespaces) > 0 {
								for _, sn := range secretNamespaces {
									out = append(out, access{g, res, v, sn, profile})
								}
								continue
							}
							out = append(out, access{g, res, v, ns, profile})
						}
					}
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown rights profile %q (deploy, operator, cloud-controller)", profile)
}

// rights asks the API server (SelfSubjectAccessReview) for every right of the
// profiles, and whether the caller is cluster-admin.
func (c *Checker) rights(ctx context.Context) Row {
	r := row("Rights", true, c.Opts.MinVersion)
	allowed := func(a access) (bool, error) {
		rev := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: a.group, Resource: a.resource, Verb: a.verb, Namespace: a.namespace}}}
		if err := c.Client.Create(ctx, rev); err != nil {
			return false, err
		}
		return rev.Status.Allowed, nil
	}
	var list []access
	for _, p := range c.Opts.Profiles {
		l, err := rightsOf(p, c.Opts.Namespace, c.Opts.OperatorNamespace, c.Opts.SecretNamespaces)
		if err != nil {
			r.set(Unknown, err.Error())
			return r
		}
		list = append(list, l...)
	}
	type result struct {
		ok  bool
		err error
	}
	results := make([]result, len(list))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, a := range list {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ok, err := allowed(a)
			results[i] = result{ok, err}
		})
	}
	wg.Wait()
	var denied []string
	checked := 0
	for i, a := range list {
		if results[i].err != nil {
			r.set(Unknown, "cannot ask the API server (SelfSubjectAccessReview): "+results[i].err.Error())
			return r
		}
		checked++
		if !results[i].ok {
			denied = append(denied, a.profile+": "+a.String())
		}
	}
	admin, _ := allowed(access{"*", "*", "*", "", ""})
	switch {
	case len(denied) > 0:
		slices.Sort(denied)
		denied = slices.Compact(denied)
		more := ""
		if len(denied) > 8 {
			more = fmt.Sprintf(" and %d more", len(denied)-8)
			denied = denied[:8]
		}
		r.set(Missing, fmt.Sprintf("%d of %d rights denied: %s%s", len(denied), checked, strings.Join(denied, ", "), more))
	case admin:
		r.set(Warning, fmt.Sprintf("all %d rights of %s granted — as cluster-admin: ask for the rights the packages need instead (no silent cluster-admin)",
			checked, strings.Join(c.Opts.Profiles, ", ")))
	default:
		r.set(OK, fmt.Sprintf("all %d rights of %s granted, not cluster-admin", checked, strings.Join(c.Opts.Profiles, ", ")))
	}
	return r
}

// knownCNIs are the signals of NetworkPolicy-enforcing CNIs: a CRD group or a
// DaemonSet in kube-system.
var knownCNIs = []struct{ name, crdGroup, daemonSet string }{
	{"Cilium", "cilium.io", "cilium"},
	{"Calico", "crd.projectcalico.org", "calico-node"},
	{"Antrea", "crd.antrea.io", "antrea-agent"},
	{"kube-router", "", "kube-router"},
	{"Weave Net", "", "weave-net"},
}

// cni: nodes Ready with their pod network; NetworkPolicy enforcement from known
// CNI signals, else unknown.
func (c *Checker) cni(ctx context.Context) Row {
	r := row("CNI", false, c.Opts.MinVersion)
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes); err != nil {
		r.set(Unknown, "cannot list Nodes: "+err.Error())
		return r
	}
	var notReady []string
	for _, n := range nodes.Items {
		ready, netOK := false, true
		for _, cond := range n.Status.Conditions {
			switch cond.Type {
			case corev1.NodeReady:
				ready = cond.Status == corev1.ConditionTrue
			case corev1.NodeNetworkUnavailable:
				netOK = cond.Status != corev1.ConditionTrue
			}
		}
		if !ready || !netOK {
			notReady = append(notReady, n.Name)
		}
	}
	if len(nodes.Items) == 0 {
		r.set(Missing, "no Nodes")
		return r
	}
	if len(notReady) > 0 {
		r.set(Missing, fmt.Sprintf("%d of %d Nodes not Ready or without pod network: %s", len(notReady), len(nodes.Items), strings.Join(notReady, ", ")))
		return r
	}
	enforcer := ""
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	_ = c.Client.List(ctx, crds)
	for _, k := range knownCNIs {
		for _, crd := range crds.Items {
			if k.crdGroup != "" && crd.Spec.Group == k.crdGroup && enforcer == "" {
				enforcer = k.name + " (CRDs " + k.crdGroup + ")"
			}
		}
		if enforcer == "" && k.daemonSet != "" {
			ds := &unstructured.Unstructured{}
			ds.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"})
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: k.daemonSet}, ds); err == nil {
				enforcer = k.name + " (DaemonSet kube-system/" + k.daemonSet + ")"
			}
		}
	}
	found := fmt.Sprintf("%d Nodes Ready with pod network", len(nodes.Items))
	if enforcer == "" {
		r.set(Unknown, found+"; NetworkPolicy enforcement unknown: no known enforcing CNI (Cilium, Calico, Antrea, kube-router, Weave) seen — ask the cluster owner")
		return r
	}
	r.set(OK, found+"; NetworkPolicies enforced by "+enforcer)
	return r
}

// provisioner access modes that are knowable from the provisioner's name.
var rwxProvisioners = []string{"cephfs", "nfs", "efs.csi.aws.com", "file.csi.azure.com", "filestore.csi.storage.gke.io", "azurefile", "longhorn"}

// storage: a default StorageClass, the class names, RWX where the provisioner says.
func (c *Checker) storage(ctx context.Context) Row {
	r := row("CSI / StorageClass", true, c.Opts.MinVersion)
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClassList"})
	if err := c.Client.List(ctx, list); err != nil {
		r.set(Unknown, "cannot list StorageClasses: "+err.Error())
		return r
	}
	var names []string
	def := ""
	rwx := []string{}
	for _, sc := range list.Items {
		prov, _, _ := unstructured.NestedString(sc.Object, "provisioner")
		name := sc.GetName() + " (" + prov + ")"
		names = append(names, name)
		if sc.GetAnnotations()["storageclass.kubernetes.io/is-default-class"] == "true" {
			def = sc.GetName()
		}
		for _, p := range rwxProvisioners {
			if strings.Contains(prov, p) {
				rwx = append(rwx, sc.GetName())
			}
		}
	}
	sort.Strings(names)
	switch {
	case len(names) == 0:
		r.set(Missing, "no StorageClass")
	case def == "":
		r.set(Missing, "no default StorageClass; classes: "+strings.Join(names, ", "))
	default:
		found := "default " + def + "; classes: " + strings.Join(names, ", ") + "; RWO: every class"
		if len(rwx) > 0 {
			found += "; RWX: " + strings.Join(rwx, ", ")
		} else {
			found += "; RWX: none known from the provisioners"
		}
		r.set(OK, found)
	}
	return r
}

// ingress: IngressClasses, GatewayClasses, or the right to install a controller.
func (c *Checker) ingress(ctx context.Context) Row {
	r := row("Ingress or Gateway", false, c.Opts.MinVersion)
	var found []string
	ic := &unstructured.UnstructuredList{}
	ic.SetGroupVersionKind(schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "IngressClassList"})
	if err := c.Client.List(ctx, ic); err == nil {
		for _, i := range ic.Items {
			ctrl, _, _ := unstructured.NestedString(i.Object, "spec", "controller")
			found = append(found, "IngressClass "+i.GetName()+" ("+ctrl+")")
		}
	}
	gc := &unstructured.UnstructuredList{}
	gc.SetGroupVersionKind(schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "GatewayClassList"})
	if err := c.Client.List(ctx, gc); err == nil {
		for _, g := range gc.Items {
			ctrl, _, _ := unstructured.NestedString(g.Object, "spec", "controllerName")
			found = append(found, "GatewayClass "+g.GetName()+" ("+ctrl+")")
		}
	}
	if len(found) > 0 {
		sort.Strings(found)
		r.set(OK, strings.Join(found, ", "))
		return r
	}
	rev := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "networking.k8s.io", Resource: "ingressclasses", Verb: "create"}}}
	if err := c.Client.Create(ctx, rev); err == nil && rev.Status.Allowed {
		r.set(Warning, "no IngressClass or GatewayClass, but the right to install an Ingress controller (create ingressclasses)")
		return r
	}
	r.set(Missing, "no IngressClass or GatewayClass, and no right to install a controller")
	return r
}

// dnsAndTime: the cluster DNS Service with Ready endpoints; node clocks from the
// kubelets' heartbeats against the API server's clock.
func (c *Checker) dnsAndTime(ctx context.Context, serverTime time.Time) Row {
	r := row("DNS and NTP", false, c.Opts.MinVersion)
	dns := ""
	for _, name := range []string{"kube-dns", "coredns"} {
		svc := &corev1.Service{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: name}, svc); err == nil {
			dns = name
			break
		}
	}
	if dns == "" {
		r.set(Missing, "no cluster DNS Service (kube-system/kube-dns or coredns)")
		return r
	}
	ready := 0
	epSlices := &unstructured.UnstructuredList{}
	epSlices.SetGroupVersionKind(schema.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSliceList"})
	if err := c.Client.List(ctx, epSlices, client.InNamespace("kube-system"), client.MatchingLabels{"kubernetes.io/service-name": dns}); err == nil {
		for _, s := range epSlices.Items {
			eps, _, _ := unstructured.NestedSlice(s.Object, "endpoints")
			for _, e := range eps {
				if ok, found, _ := unstructured.NestedBool(e.(map[string]any), "conditions", "ready"); ok || !found {
					ready++
				}
			}
		}
	}
	if ready == 0 {
		r.set(Missing, "cluster DNS Service kube-system/"+dns+" has no ready endpoints")
		return r
	}
	found := fmt.Sprintf("cluster DNS kube-system/%s with %d ready endpoints", dns, ready)
	if serverTime.IsZero() {
		r.set(Unknown, found+"; node clocks unknown: the API server sent no Date")
		return r
	}
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes); err != nil {
		r.set(Unknown, found+"; node clocks unknown: "+err.Error())
		return r
	}
	var skewed []string
	worst := time.Duration(0)
	seen := 0
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type != corev1.NodeReady || cond.LastHeartbeatTime.IsZero() {
				continue
			}
			seen++
			d := cond.LastHeartbeatTime.Sub(serverTime)
			switch {
			case d > 30*time.Second:
				skewed = append(skewed, fmt.Sprintf("%s ahead %s", n.Name, d.Round(time.Second)))
			case d < -5*time.Minute:
				skewed = append(skewed, fmt.Sprintf("%s behind or silent %s", n.Name, (-d).Round(time.Second)))
			}
			if d < 0 {
				d = -d
			}
			worst = max(worst, d)
		}
	}
	switch {
	case len(skewed) > 0:
		r.set(Warning, found+"; node clocks off against the API server's (from kubelet heartbeats): "+strings.Join(skewed, ", "))
	case seen == 0:
		r.set(Unknown, found+"; node clocks unknown: no kubelet heartbeats")
	default:
		r.set(OK, fmt.Sprintf("%s; %d node clocks within %s of the API server's (kubelet heartbeats; NTP itself is not visible)", found, seen, worst.Round(time.Second)))
	}
	return r
}

// objectStorage: a Velero BackupStorageLocation that is Available, or a Ready
// S3Bucket; a location inside the cluster is no disaster recovery.
func (c *Checker) objectStorage(ctx context.Context) Row {
	r := row("Object storage", false, c.Opts.MinVersion)
	bsl := &unstructured.UnstructuredList{}
	bsl.SetGroupVersionKind(schema.GroupVersionKind{Group: "velero.io", Version: "v1", Kind: "BackupStorageLocationList"})
	var avail, unavail, inCluster []string
	if err := c.Client.List(ctx, bsl); err == nil {
		for _, b := range bsl.Items {
			phase, _, _ := unstructured.NestedString(b.Object, "status", "phase")
			url, _, _ := unstructured.NestedString(b.Object, "spec", "config", "s3Url")
			name := b.GetNamespace() + "/" + b.GetName()
			if phase == "Available" {
				avail = append(avail, name)
			} else {
				unavail = append(unavail, fmt.Sprintf("%s (phase %q)", name, phase))
			}
			if strings.Contains(url, ".svc") || strings.Contains(url, "cluster.local") {
				inCluster = append(inCluster, name+" → "+url)
			}
		}
	}
	buckets := &v1.S3BucketList{}
	var ready []string
	if err := c.Client.List(ctx, buckets); err == nil {
		for _, b := range buckets.Items {
			if b.Status.Phase == "Ready" {
				ready = append(ready, b.Namespace+"/"+b.Name)
			}
		}
	}
	switch {
	case len(inCluster) > 0:
		r.set(Warning, "backups go to storage inside the cluster they protect: "+strings.Join(inCluster, ", "))
	case len(avail) > 0:
		r.set(OK, "Velero BackupStorageLocation Available: "+strings.Join(avail, ", "))
	case len(ready) > 0:
		r.set(OK, "S3Bucket Ready: "+strings.Join(ready, ", "))
	case len(unavail) > 0:
		r.set(Missing, "Velero BackupStorageLocation not Available: "+strings.Join(unavail, ", "))
	default:
		r.set(Missing, "no Velero BackupStorageLocation and no Ready S3Bucket")
	}
	return r
}

// registry: the agreed pull secrets exist in the namespace and are on its
// default ServiceAccount.
func (c *Checker) registry(ctx context.Context) Row {
	r := row("Registry pull", false, c.Opts.MinVersion)
	if len(c.Opts.PullSecrets) == 0 {
		found := "no pull secret named (--pull-secret): which registry the team agreed on is not known to the cluster"
		if c.Opts.RegistryMirror != "" {
			found = "mirror " + c.Opts.RegistryMirror + " named; nodes' mirror configuration is not visible from the API"
		}
		r.set(Unknown, found)
		return r
	}
	sa := &corev1.ServiceAccount{}
	onSA := map[string]bool{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Opts.Namespace, Name: "default"}, sa); err == nil {
		for _, s := range sa.ImagePullSecrets {
			onSA[s.Name] = true
		}
	}
	var problems, good []string
	for _, name := range c.Opts.PullSecrets {
		s := &corev1.Secret{}
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Opts.Namespace, Name: name}, s)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("Secret %s/%s missing", c.Opts.Namespace, name))
		case s.Type != corev1.SecretTypeDockerConfigJson && s.Type != corev1.SecretTypeDockercfg:
			problems = append(problems, fmt.Sprintf("Secret %s/%s is %s, not a registry credential", c.Opts.Namespace, name, s.Type))
		case !onSA[name]:
			problems = append(problems, fmt.Sprintf("%s not on ServiceAccount %s/default", name, c.Opts.Namespace))
		default:
			good = append(good, name)
		}
	}
	if len(problems) > 0 {
		r.set(Missing, strings.Join(problems, "; "))
		return r
	}
	found := "pull secrets " + strings.Join(good, ", ") + " on ServiceAccount " + c.Opts.Namespace + "/default"
	if c.Opts.RegistryMirror != "" {
		found += "; mirror " + c.Opts.RegistryMirror + " named (nodes' mirror configuration is not visible from the API)"
	}
	r.set(OK, found)
	return r
}
