package emulator

import (
	"os"
	"strings"
	"testing"
)

// TestContractDocumentMatchesTable: docs/api-contract.md carries the table the
// emulator serves; regenerate with `go run ./hack/gen-api-contract`.
func TestContractDocumentMatchesTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/api-contract.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, ContractBegin), strings.Index(doc, ContractEnd)
	if i < 0 || j < i {
		t.Fatal("docs/api-contract.md lacks the generated-table markers")
	}
	if got, want := strings.TrimSpace(doc[i+len(ContractBegin):j]), strings.TrimSpace(ContractMarkdown()); got != want {
		t.Fatal("docs/api-contract.md is out of date with the emulator's resource table: run 'go run ./hack/gen-api-contract'")
	}
	for _, r := range Table {
		if !strings.Contains(doc, r.Path) {
			t.Errorf("the contract does not mention %s", r.Path)
		}
	}
}
