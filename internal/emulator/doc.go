package emulator

import (
	"fmt"
	"sort"
	"strings"
)

// Contract markers in docs/api-contract.md: the text between them is generated
// from the resource table (go run ./hack/gen-api-contract), and a test fails when
// the document and the table drift apart.
const (
	ContractBegin = "<!-- BEGIN GENERATED RESOURCE TABLE (go run ./hack/gen-api-contract) -->"
	ContractEnd   = "<!-- END GENERATED RESOURCE TABLE -->"
)

// ContractMarkdown renders the resource table: per resource its path, source,
// scope, delete semantics, constraints, filters and request fields.
func ContractMarkdown() string {
	var b strings.Builder
	b.WriteString("Every ManagedObject resource below also has these common fields (reference inventory §0.3):\n\n| field | type |\n|---|---|\n")
	for _, f := range append(commonWritable(), commonReadOnly()...) {
		fmt.Fprintf(&b, "| `%s` | %s |\n", f.Name, f.describe())
	}
	b.WriteString("\n")
	for _, r := range Table {
		fmt.Fprintf(&b, "### `%s`\n\n", r.Path)
		fmt.Fprintf(&b, "Source: %s. ", r.Source)
		scope := map[Scope]string{ScopeWorkspace: "workspace (agent tokens see their own workspace)",
			ScopeOrganization: "organization (agent tokens see their own organization)", ScopeGlobal: "platform (every token reads)"}[r.Scope]
		fmt.Fprintf(&b, "Scope: %s.", scope)
		switch {
		case r.NoWrites:
			b.WriteString(" Read-only (writes answer 405).")
		case r.AgentReadOnly:
			b.WriteString(" Agent tokens read only (writes answer 403).")
		case r.AgentNoDelete:
			b.WriteString(" Agent tokens may not delete (403).")
		}
		if r.ListPlain {
			b.WriteString(" The list is a plain JSON array.")
		} else if !r.NoWrites || r.Name == "agents" {
			if r.SoftDelete {
				b.WriteString(" DELETE: 202, soft delete (`is_deleted` until purged).")
			} else {
				b.WriteString(" DELETE: 204.")
			}
		}
		if r.UniquePerWorkspace {
			b.WriteString(" Unique: one per workspace (409 `conflict`).")
		}
		if len(r.Unique) > 0 {
			where := "per workspace"
			if r.UniqueGlobal {
				where = "across workspaces"
			}
			fmt.Fprintf(&b, " Unique: %s %s (409 `conflict`).", strings.Join(r.Unique, " + "), where)
		}
		if len(r.NaturalKey) > 0 {
			fmt.Fprintf(&b, " Natural key (no constraint; duplicates are recorded as collisions): %s.", strings.Join(r.NaturalKey, " + "))
		}
		if len(r.Filters) > 0 {
			keys := make([]string, 0, len(r.Filters))
			for k := range r.Filters {
				keys = append(keys, "`"+k+"`")
			}
			sort.Strings(keys)
			fmt.Fprintf(&b, " Filters: %s.", strings.Join(keys, ", "))
		}
		b.WriteString("\n\n")
		writeFields := func(title string, fields []Field) {
			fmt.Fprintf(&b, "%s\n\n| field | type |\n|---|---|\n", title)
			for _, f := range fields {
				if isCommonField(f.Name) {
					continue
				}
				desc := f.describe()
				if f.Doc != "" {
					desc += " — " + f.Doc
				}
				fmt.Fprintf(&b, "| `%s` | %s |\n", f.Name, desc)
				writeSub(&b, f.Name, f.Fields)
			}
			b.WriteString("\n")
		}
		if r.CreateFields != nil {
			writeFields("Create body:", r.CreateFields)
		}
		if r.UpdateFields != nil {
			writeFields("Update body:", r.UpdateFields)
		}
		writeFields("Fields (besides the common ManagedObject fields):", r.Fields)
	}
	return b.String()
}

func writeSub(b *strings.Builder, prefix string, fields []Field) {
	for _, sf := range fields {
		fmt.Fprintf(b, "| `%s.%s` | %s |\n", prefix, sf.Name, sf.describe())
		writeSub(b, prefix+"."+sf.Name, sf.Fields)
	}
}

var commonNames = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range append(commonWritable(), commonReadOnly()...) {
		m[f.Name] = true
	}
	return m
}()

func isCommonField(name string) bool { return commonNames[name] && name != "name" && name != "kind" }
