package k8sapps

import (
	"context"
	"slices"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/polycrate/polycrate-operator/internal/kube"
	"github.com/polycrate/polycrate-operator/internal/slimcache"
)

// Pod is what K8sApp discovery keeps of a counted Pod (Counted): only what the
// status and the conflict events need. Strings many Pods share (images, owners,
// app names, states) are interned.
type Pod struct {
	Name string
	// App is the polycrate_k8sapp_name annotation ("" for none).
	App   unique.Handle[string]
	Owner Owner
	Phase unique.Handle[corev1.PodPhase]
	// Status is the phase, or a waiting container's reason (CrashLoopBackOff).
	Status     unique.Handle[string]
	Ready      bool
	Restarts   int32
	Containers []Container
}

// Owner is a Pod's controlling owner.
type Owner struct {
	Kind, Name unique.Handle[string]
	UID        unique.Handle[types.UID]
}

// Container is one container of a Pod, with its status.
type Container struct {
	Name, Image unique.Handle[string]
	Ready       bool
	Restarts    int32
}

func equalPod(a, b *Pod) bool {
	return a.Name == b.Name && a.App == b.App && a.Owner == b.Owner && a.Phase == b.Phase && a.Status == b.Status &&
		a.Ready == b.Ready && a.Restarts == b.Restarts && slices.Equal(a.Containers, b.Containers)
}

var noApp = unique.Make("")

// AppName is the Pod's app annotation.
func (p *Pod) AppName() string { return p.App.Value() }

// SlimPod is the compact form of a counted Pod; false for any other Pod (Jobs,
// bare Pods, completed or terminating Pods), which discovery never needs.
func SlimPod(p *corev1.Pod) (Pod, bool) {
	if !Counted(p) {
		return Pod{}, false
	}
	out := Pod{Name: p.Name, App: noApp, Phase: unique.Make(p.Status.Phase), Status: unique.Make(string(p.Status.Phase))}
	if v := p.Annotations[kube.PodAnnotationK8sAppName]; v != "" {
		out.App = unique.Make(v)
	}
	if c := metav1.GetControllerOfNoCopy(p); c != nil {
		out.Owner = Owner{Kind: unique.Make(c.Kind), Name: unique.Make(c.Name), UID: unique.Make(c.UID)}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			out.Ready = true
		}
	}
	statuses := make(map[string]corev1.ContainerStatus, len(p.Status.ContainerStatuses))
	for _, cs := range p.Status.ContainerStatuses {
		statuses[cs.Name] = cs
		out.Restarts += cs.RestartCount
		// A waiting reason says more than the phase (CrashLoopBackOff, ImagePullBackOff).
		if w := cs.State.Waiting; w != nil && w.Reason != "" && (p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending) {
			out.Status = unique.Make(w.Reason)
		}
	}
	out.Containers = make([]Container, len(p.Spec.Containers))
	for i, c := range p.Spec.Containers {
		cs := statuses[c.Name]
		out.Containers[i] = Container{Name: unique.Make(c.Name), Image: unique.Make(c.Image), Ready: cs.Ready, Restarts: cs.RestartCount}
	}
	return out, true
}

// PodStore is the cluster-wide store of counted Pods, indexed by app name.
type PodStore struct {
	*slimcache.Store[Pod]
	mu   sync.RWMutex
	apps map[string]map[string]int // app → namespace → counted Pods annotated with it
}

// NewPodStore lists and watches Pods cluster-wide into a PodStore (add it to the
// manager to run it).
func NewPodStore(cfg *rest.Config) (*PodStore, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	pods := cs.CoreV1().Pods(metav1.NamespaceAll)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, o)
		},
	}
	return newPodStore(lw), nil
}

func newPodStore(lw toolscache.ListerWatcher) *PodStore {
	ps := &PodStore{apps: map[string]map[string]int{}}
	ps.Store = slimcache.New(slimcache.Options[Pod]{
		Name: "pods", ListWatch: lw, Example: &corev1.Pod{},
		Slim: func(obj any) (Pod, bool) {
			p, ok := obj.(*corev1.Pod)
			if !ok {
				return Pod{}, false
			}
			return SlimPod(p)
		},
		// The streaming list buffers counted Pods stripped, the others as a name.
		Trim: func(obj any) (any, error) {
			p, ok := obj.(*corev1.Pod)
			if !ok {
				return obj, nil
			}
			if !Counted(p) {
				return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}, nil
			}
			return kube.StripPod(p)
		},
		Equal: equalPod,
		Index: ps.index,
	})
	return ps
}

// index keeps the app index (under the store's lock).
func (ps *PodStore) index(e slimcache.Event[Pod]) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if e.Old != nil && e.Old.App != noApp {
		app := e.Old.AppName()
		if ps.apps[app][e.Namespace]--; ps.apps[app][e.Namespace] <= 0 {
			delete(ps.apps[app], e.Namespace)
			if len(ps.apps[app]) == 0 {
				delete(ps.apps, app)
			}
		}
	}
	if e.New != nil && e.New.App != noApp {
		app := e.New.AppName()
		if ps.apps[app] == nil {
			ps.apps[app] = map[string]int{}
		}
		ps.apps[app][e.Namespace]++
	}
}

// Namespaces are the namespaces with counted Pods annotated with app, sorted.
func (ps *PodStore) Namespaces(app string) []string {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	out := make([]string, 0, len(ps.apps[app]))
	for ns := range ps.apps[app] {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// List returns a namespace's counted Pods: all of them (app ""), or those
// annotated with app.
func (ps *PodStore) List(namespace, app string) []*Pod {
	var out []*Pod
	ps.Range(namespace, func(_, _ string, p *Pod) {
		if app == "" || p.AppName() == app {
			out = append(out, p)
		}
	})
	return out
}
