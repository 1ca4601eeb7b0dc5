package kube

import (
	"sync"
	"sync/atomic"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// Interner hands out one shared copy of each string it has seen, for the
// strings thousands of cached objects repeat: namespaces, label and annotation
// keys, short label values ("true"), finalizers, owner kinds, phases, condition
// reasons. A decoder allocates each of them anew for every object: at 10,000
// Endpoints the repeats were about 190 bytes per object (TestInternedEndpoint
// in internal/manager).
//
// It holds at most Max strings (default 8,192; about a MiB at most); past that
// it keeps what it has and returns any other string unchanged, so a cluster of
// unique values costs a bounded table, never a growing one. Strings longer than
// MaxLen (default 64) are never interned: long values are rarely repeated.
type Interner struct {
	Max, MaxLen int
	// Values, if set, interns label and annotation values in InternMeta: they
	// are often unique (a source's name), so they get a table of their own and
	// cannot crowd out the keys.
	Values *Interner

	m sync.Map // string → string
	n atomic.Int64
}

// Intern returns the shared copy of s (s itself when it is new and the table
// is full, or s is long or empty).
func (in *Interner) Intern(s string) string {
	maxLen := in.MaxLen
	if maxLen <= 0 {
		maxLen = 64
	}
	if s == "" || len(s) > maxLen {
		return s
	}
	if v, ok := in.m.Load(s); ok {
		return v.(string)
	}
	limit := int64(in.Max)
	if limit <= 0 {
		limit = 8192
	}
	if in.n.Load() >= limit {
		return s
	}
	v, loaded := in.m.LoadOrStore(s, s)
	if !loaded {
		in.n.Add(1)
	}
	return v.(string)
}

// Len is the number of strings held.
func (in *Interner) Len() int { return int(in.n.Load()) }

// InternMeta replaces the repeated strings of an object's metadata by shared
// copies: namespace, label keys and values, annotation keys and short values,
// finalizers, owner references' API versions and kinds. Names, UIDs and
// resource versions are unique per object and left alone.
func (in *Interner) InternMeta(o metav1.Object) {
	if ns := o.GetNamespace(); ns != "" {
		o.SetNamespace(in.Intern(ns))
	}
	vals := in.Values
	if vals == nil {
		vals = in
	}
	internMap(in, vals, o.GetLabels())
	internMap(in, vals, o.GetAnnotations())
	fs := o.GetFinalizers()
	for i := range fs {
		fs[i] = in.Intern(fs[i])
	}
	refs := o.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion = in.Intern(refs[i].APIVersion)
		refs[i].Kind = in.Intern(refs[i].Kind)
	}
}

// internMap interns a map's keys and values in place (a key is replaced by
// deleting and storing it again, which reuses its slot).
func internMap(keys, vals *Interner, m map[string]string) {
	for k, v := range m {
		ik := keys.Intern(k)
		if unsafeSameString(ik, k) {
			m[k] = vals.Intern(v)
			continue
		}
		delete(m, k)
		m[ik] = vals.Intern(v)
	}
}

// unsafeSameString says whether two strings share their bytes.
func unsafeSameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// Strings is the operator's interner, shared by its caches' transforms; label
// and annotation values go to a table of 1,024.
var Strings = &Interner{Values: &Interner{Max: 1024}}

// InternTransform is a cache transform: managedFields dropped (as
// controller-runtime's TransformStripManagedFields does), InternMeta on
// Strings, then each of more, in order. Everything else of the object stays.
func InternTransform(more ...func(any)) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if o, ok := obj.(metav1.Object); ok {
			if o.GetManagedFields() != nil {
				o.SetManagedFields(nil)
			}
			Strings.InternMeta(o)
		}
		for _, f := range more {
			f(obj)
		}
		return obj, nil
	}
}
