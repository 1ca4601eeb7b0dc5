package liveconfig

import (
	"errors"
	"testing"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

func TestNamespaceFilter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filter NamespaceFilter
		ns     string
		want   bool
	}{
		{"empty watch allows all", NamespaceFilter{}, "prod", true},
		{"ignored", NamespaceFilter{Ignore: []string{"kube-system"}}, "kube-system", false},
		{"not ignored", NamespaceFilter{Ignore: []string{"kube-system"}}, "prod", true},
		{"watched", NamespaceFilter{Watch: []string{"prod", "staging"}}, "staging", true},
		{"not watched", NamespaceFilter{Watch: []string{"prod", "staging"}}, "dev", false},
		{"in both lists: ignored", NamespaceFilter{Watch: []string{"prod"}, Ignore: []string{"prod"}}, "prod", false},
		{"empty namespace name with a watch list", NamespaceFilter{Watch: []string{"prod"}}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.filter.Allows(tc.ns); got != tc.want {
				t.Fatalf("Allows(%q) = %v, want %v", tc.ns, got, tc.want)
			}
		})
	}
}

func TestSeedExampleAndClusterIgnores(t *testing.T) {
	// The seed's OperatorConfig example, plus the API cluster record's ignore list.
	s := &Snapshot{Spec: v1.OperatorConfigSpec{
		EndpointDiscovery: v1.EndpointDiscoveryConfig{IgnoreNamespaces: []string{"kube-system", "kube-public", "polycrate"}},
		AppDiscovery:      v1.AppDiscoveryConfig{WatchNamespaces: []string{"prod", "legacy"}, IgnoreNamespaces: []string{"kube-system"}},
	}, ClusterIgnoreNamespaces: []string{"legacy", ""}}
	ep := s.EndpointNamespaces()
	for ns, want := range map[string]bool{"production": true, "polycrate": false, "kube-public": false, "legacy": false} {
		if got := ep.Allows(ns); got != want {
			t.Errorf("endpoints %s: %v, want %v", ns, got, want)
		}
	}
	app := s.AppNamespaces()
	for ns, want := range map[string]bool{"prod": true, "legacy": false, "other": false} {
		if got := app.Allows(ns); got != want {
			t.Errorf("apps %s: %v, want %v", ns, got, want)
		}
	}
	// WithIgnored does not change the spec's lists.
	if len(s.Spec.EndpointDiscovery.IgnoreNamespaces) != 3 {
		t.Fatal("the snapshot's spec was modified")
	}
}

func TestStoreNotifies(t *testing.T) {
	var st Store
	if st.Get() != nil {
		t.Fatal("a new store has a snapshot")
	}
	ch := st.Subscribe()
	st.Set(&Snapshot{Generation: 1})
	st.Set(&Snapshot{Generation: 2}) // coalesced with the first notification
	<-ch
	select {
	case <-ch:
		t.Fatal("two notifications pending")
	default:
	}
	if st.Get().Generation != 2 {
		t.Fatal("latest snapshot not returned")
	}
	st.Set(nil)
	<-ch
	if st.Get() != nil {
		t.Fatal("snapshot not withdrawn")
	}
}

func TestEnabled(t *testing.T) {
	f, tr := false, true
	if !Enabled(nil) || !Enabled(&tr) || Enabled(&f) {
		t.Fatal("Enabled")
	}
}

func TestLocalClusterGate(t *testing.T) {
	var nilSnap *Snapshot
	for _, s := range []*Snapshot{nilSnap, {}} {
		if _, err := s.LocalCluster(); err != ErrNoLocalCluster {
			t.Fatalf("want ErrNoLocalCluster, got %v", err)
		}
	}
	id, err := (&Snapshot{LocalClusterID: "c-1"}).LocalCluster()
	if err != nil || id != "c-1" {
		t.Fatalf("got %q, %v", id, err)
	}
	// Switched off: a defined outcome (even with a cluster registered before),
	// still an ErrNoLocalCluster for the code that only asks "is there one?".
	off := false
	s := &Snapshot{LocalClusterID: "c-1"}
	s.Spec.LocalCluster.Enabled = &off
	if _, err := s.LocalCluster(); !errors.Is(err, ErrLocalClusterDisabled) || !errors.Is(err, ErrNoLocalCluster) {
		t.Fatalf("switched off: %v", err)
	}
}

func TestStoreLoaded(t *testing.T) {
	var s Store
	ch := s.Subscribe()
	if s.Loaded() || s.Get() != nil {
		t.Fatal("a new store is loaded")
	}
	s.MarkLoaded()
	if !s.Loaded() || s.Get() != nil {
		t.Fatal("MarkLoaded did not mark, or set a snapshot")
	}
	select {
	case <-ch:
	default:
		t.Fatal("MarkLoaded did not notify")
	}
	s.MarkLoaded() // once only
	select {
	case <-ch:
		t.Fatal("a second MarkLoaded notified")
	default:
	}
	var s2 Store
	s2.Set(nil)
	if !s2.Loaded() {
		t.Fatal("Set(nil) does not count as loaded")
	}
}
