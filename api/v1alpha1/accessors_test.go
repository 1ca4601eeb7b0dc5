package v1alpha1

import "testing"

// The Endpoint spells its phase in lower case; the kit reads it capitalised,
// and reads the kit's three phases without allocating.
func TestEndpointSyncStatePhase(t *testing.T) {
	for _, tc := range []struct{ stored, read string }{
		{"", ""}, {"synced", PhaseSynced}, {"pending", PhasePending}, {"error", PhaseError}, {"retiring", "Retiring"}, {"x", "X"},
	} {
		e := &Endpoint{Status: EndpointStatus{Phase: tc.stored, APIID: "id"}}
		if got := e.SyncState(); got.Phase != tc.read || got.APIID != "id" {
			t.Errorf("stored %q: read %+v, want phase %q", tc.stored, got, tc.read)
		}
	}
	for _, phase := range []string{PhasePending, PhaseSynced, PhaseError} {
		e := &Endpoint{}
		e.SetSyncState(SyncState{Phase: phase})
		if got := e.SyncState().Phase; got != phase {
			t.Errorf("%s written, %s read", phase, got)
		}
		if n := testing.AllocsPerRun(100, func() { _ = e.SyncState() }); n != 0 {
			t.Errorf("reading %s allocates %.0f times", phase, n)
		}
	}
}
