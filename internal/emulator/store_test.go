package emulator

import (
	"path/filepath"
	"slices"
	"testing"
)

// List keeps creation order without a sort per call: through edits, removals,
// an id stored again after its removal, an object put into the live map by
// Update, and a reload from the data file.
func TestListKeepsCreationOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.db")
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(res string) []string {
		t.Helper()
		var out []string
		var last int64
		for _, o := range s.List(res) {
			if o.Seq <= last {
				t.Fatalf("List(%s) out of order at %s: seq %d after %d", res, o.ID, o.Seq, last)
			}
			last = o.Seq
			out = append(out, o.ID)
		}
		return out
	}
	want := func(res string, exp ...string) {
		t.Helper()
		if got := ids(res); !slices.Equal(got, exp) {
			t.Fatalf("List(%s) = %v, want %v", res, got, exp)
		}
	}
	save := func(res string, names ...string) {
		t.Helper()
		for _, n := range names {
			if err := s.Save(&Object{Resource: res, ID: n, Data: map[string]any{"name": n}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	save("hosts", "a", "b", "c", "d")
	save("pops", "p")
	save("hosts", "e")
	want("hosts", "a", "b", "c", "d", "e")
	want("pops", "p")

	// An edit keeps the object's place.
	if err := s.Update("hosts", func(objs map[string]*Object) ([]*Object, error) {
		return []*Object{edit(objs, "b", func(o *Object) { o.Data["name"] = "b2" })}, nil
	}); err != nil {
		t.Fatal(err)
	}
	want("hosts", "a", "b", "c", "d", "e")

	// Removed ids drop out; one stored again comes last, once.
	for _, id := range []string{"a", "c"} {
		if err := s.Remove("hosts", id); err != nil {
			t.Fatal(err)
		}
	}
	want("hosts", "b", "d", "e")
	save("hosts", "a")
	want("hosts", "b", "d", "e", "a")

	// An object Update's fn adds to the live map is numbered when committed.
	if err := s.Update("hosts", func(objs map[string]*Object) ([]*Object, error) {
		o := &Object{Resource: "hosts", ID: "f", Data: map[string]any{"name": "f"}}
		objs["f"] = o
		return []*Object{o}, nil
	}); err != nil {
		t.Fatal(err)
	}
	want("hosts", "b", "d", "e", "a", "f")

	// Many removals: the order is rebuilt, not walked past stale ids for ever.
	for _, id := range []string{"b", "d", "e"} {
		if err := s.Remove("hosts", id); err != nil {
			t.Fatal(err)
		}
	}
	want("hosts", "a", "f")
	if n := len(s.order["hosts"]); n > 2*len(s.objs["hosts"]) {
		t.Fatalf("the order holds %d ids for %d objects", n, len(s.objs["hosts"]))
	}
	save("hosts", "g")
	want("hosts", "a", "f", "g")

	// A reload reads the rows in any order and lists by creation again.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = OpenStore(path); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	want("hosts", "a", "f", "g")
	want("pops", "p")
	save("hosts", "h")
	want("hosts", "a", "f", "g", "h")
}
