package kube

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fresh returns a copy of s in its own memory, as a decoder would.
func fresh(s string) string { return strings.Clone(s) }

func TestInterner(t *testing.T) {
	in := &Interner{Max: 3, MaxLen: 8}
	a, b := fresh("true"), fresh("true")
	if got := in.Intern(a); unsafe.StringData(got) != unsafe.StringData(a) {
		t.Fatal("the first copy of a string is not the one kept")
	}
	if got := in.Intern(b); got != "true" || unsafe.StringData(got) != unsafe.StringData(a) {
		t.Fatal("a repeat is not replaced by the kept copy")
	}
	long := fresh("longer-than-eight")
	if got := in.Intern(long); unsafe.StringData(got) != unsafe.StringData(long) || in.Len() != 1 {
		t.Fatal("a long string was interned")
	}
	if got := in.Intern(""); got != "" || in.Len() != 1 {
		t.Fatal("the empty string was interned")
	}
	in.Intern("b")
	in.Intern("c")
	d := fresh("d")
	if got := in.Intern(d); unsafe.StringData(got) != unsafe.StringData(d) || in.Len() != 3 {
		t.Fatalf("the table grew past its bound: %d", in.Len())
	}
	// What it held before it was full is still shared.
	if got := in.Intern(fresh("c")); unsafe.StringData(got) == unsafe.StringData(d) || got != "c" {
		t.Fatal("a kept string is no longer shared once the table is full")
	}
}

// InternMeta changes no value, only where the bytes live.
func TestInternMeta(t *testing.T) {
	in := &Interner{Values: &Interner{Max: 2}}
	objs := make([]*metav1.ObjectMeta, 2)
	for i := range objs {
		objs[i] = &metav1.ObjectMeta{
			Name: fmt.Sprintf("ep-%d", i), Namespace: fresh("team-a"),
			Labels:          map[string]string{fresh("polycrate.io/discovered"): fresh("true"), fresh("polycrate.io/source-ingress"): fmt.Sprintf("app-%d", i)},
			Annotations:     map[string]string{fresh("note"): fresh(strings.Repeat("x", 100))},
			Finalizers:      []string{fresh("polycrate.io/endpoint-cleanup")},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: fresh("networking.k8s.io/v1"), Kind: fresh("Ingress"), Name: fmt.Sprintf("app-%d", i)}},
		}
	}
	want := []*metav1.ObjectMeta{objs[0].DeepCopy(), objs[1].DeepCopy()}
	for _, o := range objs {
		in.InternMeta(o)
	}
	for i := range objs {
		if fmt.Sprint(objs[i]) != fmt.Sprint(want[i]) {
			t.Fatalf("object %d changed:\n%v\n%v", i, objs[i], want[i])
		}
	}
	same := func(what, a, b string) {
		t.Helper()
		if unsafe.StringData(a) != unsafe.StringData(b) {
			t.Errorf("%s is not shared", what)
		}
	}
	same("the namespace", objs[0].Namespace, objs[1].Namespace)
	same("a label value", objs[0].Labels["polycrate.io/discovered"], objs[1].Labels["polycrate.io/discovered"])
	same("a finalizer", objs[0].Finalizers[0], objs[1].Finalizers[0])
	same("an owner kind", objs[0].OwnerReferences[0].Kind, objs[1].OwnerReferences[0].Kind)
	keys := map[string][]string{}
	for _, o := range objs {
		for k := range o.Labels {
			keys[k] = append(keys[k], k)
		}
	}
	for k, ks := range keys {
		same("the label key "+k, ks[0], ks[1])
	}
	if a, b := objs[0].Annotations["note"], objs[1].Annotations["note"]; unsafe.StringData(a) == unsafe.StringData(b) {
		t.Error("a long annotation value was interned")
	}
	// Values have a table of their own: the first object filled it
	// (bound 2: "true" and the first name), and never took the keys' room.
	if in.Values.Len() != 2 || in.Len() != 7 {
		t.Errorf("tables hold %d keys and %d values, want 7 and 2", in.Len(), in.Values.Len())
	}
}

func BenchmarkInternMeta(b *testing.B) {
	in := &Interner{}
	o := &metav1.ObjectMeta{Namespace: "team-a", Labels: map[string]string{"polycrate.io/discovered": "true", "polycrate.io/source-ingress": "app-1"},
		Finalizers: []string{"polycrate.io/endpoint-cleanup"}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		in.InternMeta(o)
	}
}
