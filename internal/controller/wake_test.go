package controller

import (
	"testing"

	"github.com/polycrate/polycrate-operator/internal/liveconfig"
)

// What a configuration signal wakes: every object after a real change, or after
// a first load that reconciles waited for; otherwise only what waits for the API.
func TestConfigScope(t *testing.T) {
	snapA, snapB := &liveconfig.Snapshot{Generation: 1}, &liveconfig.Snapshot{Generation: 2}
	type step struct {
		name string
		do   func(*liveconfig.Store)
		all  bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a restart: the configuration arrives before any reconcile, then the connection", []step{
			{"load", func(s *liveconfig.Store) { s.Set(snapA) }, false},
			{"connected", func(s *liveconfig.Store) { s.Notify() }, false},
			{"a new spec", func(s *liveconfig.Store) { s.Set(snapB) }, true},
			{"connection again", func(s *liveconfig.Store) { s.Notify() }, false},
		}},
		{"reconciles waited for the first load", []step{
			{"a reconcile before the load", func(s *liveconfig.Store) {
				if !s.Early() {
					t.Error("Early before the load")
				}
			}, false},
			{"load", func(s *liveconfig.Store) { s.Set(snapA) }, true},
			{"connected", func(s *liveconfig.Store) { s.Notify() }, false},
		}},
		{"a reconcile after the load waits for nothing", []step{
			{"load", func(s *liveconfig.Store) {
				s.Set(snapA)
				if s.Early() {
					t.Error("Early after the load")
				}
			}, false},
		}},
		{"the connection before the configuration", []step{
			{"connected", func(s *liveconfig.Store) { s.Notify() }, false},
			{"load after a wait", func(s *liveconfig.Store) { s.Early(); s.Set(snapA) }, true},
		}},
		{"no OperatorConfig at start, then one", []step{
			{"found absent", func(s *liveconfig.Store) { s.MarkLoaded() }, false},
			{"created", func(s *liveconfig.Store) { s.Set(snapA) }, true},
			{"deleted", func(s *liveconfig.Store) { s.Set(nil) }, true},
		}},
	}
	// A waker set up after the configuration loaded (a controller started
	// when its CRD appears) takes its first signal for what it is.
	cases = append(cases, struct {
		name  string
		steps []step
	}{"set up late", []step{
		{"a new spec", func(s *liveconfig.Store) { s.Set(snapB) }, true},
		{"connected", func(s *liveconfig.Store) { s.Notify() }, false},
	}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := &liveconfig.Store{}
			if tc.name == "set up late" {
				store.Set(snapA)
			}
			scope := newConfigScope(store)
			for _, st := range tc.steps {
				st.do(store)
				if got := scope.all(store); got != st.all {
					t.Errorf("%s: wakes every object = %v, want %v", st.name, got, st.all)
				}
			}
		})
	}
}
