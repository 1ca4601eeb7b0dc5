package metasecret

import (
	"strings"
	"testing"
	"time"
)

// valid is the seed's K8sApp example as the CLI's meta-Secret.
const valid = `block:
  name: nginx-ingress
  display_name: NGINX Ingress Controller
  kind: helm
  version: 1.2.0
  app_version: 1.9.6
  from: cargo.ayedo.cloud/ayedo/k8s/nginx-ingress
  type: ingress-controller
  flavor: nginx
  chart:
    name: ingress-nginx
    version: 4.9.0
    repo_url: https://kubernetes.github.io/ingress-nginx
workspace:
  name: production
  organization: acme-corp
action:
  name: install
  status: success
  last_executed_at: "2025-12-20T10:00:00Z"
`

func TestParseValid(t *testing.T) {
	m, err := Parse("nginx-ingress.poly", map[string][]byte{Key: []byte(valid)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Block.Name != "nginx-ingress" || m.Block.Kind != "helm" || m.Block.Version != "1.2.0" || m.Block.AppVersion != "1.9.6" ||
		m.Block.From != "cargo.ayedo.cloud/ayedo/k8s/nginx-ingress" || m.Block.Type != "ingress-controller" || m.Block.Flavor != "nginx" ||
		m.Block.DisplayName != "NGINX Ingress Controller" {
		t.Errorf("block = %+v", m.Block)
	}
	if m.Block.Chart == nil || *m.Block.Chart != (Chart{Name: "ingress-nginx", Version: "4.9.0", RepoURL: "https://kubernetes.github.io/ingress-nginx"}) {
		t.Errorf("chart = %+v", m.Block.Chart)
	}
	if m.Workspace != (Workspace{Name: "production", Organization: "acme-corp"}) {
		t.Errorf("workspace = %+v", m.Workspace)
	}
	if m.Action.Name != "install" || m.Action.Status != "success" || !m.Action.LastExecutedAt.Equal(time.Date(2025, 12, 20, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("action = %+v", m.Action)
	}
	// JSON is YAML too.
	js := `{"block":{"name":"redis","kind":"polycrate"},"workspace":{"name":"w","organization":"o"},"action":{"name":"install","status":"running","last_executed_at":"2025-12-20T10:00:00+01:00"}}`
	if _, err := Parse("redis.poly", map[string][]byte{Key: []byte(js)}); err != nil {
		t.Errorf("JSON form: %v", err)
	}
	// An unquoted YAML timestamp is read as well.
	if _, err := Parse("nginx-ingress.poly", map[string][]byte{Key: []byte(strings.Replace(valid, `"2025-12-20T10:00:00Z"`, `2025-12-20T10:00:00Z`, 1))}); err != nil {
		t.Errorf("unquoted timestamp: %v", err)
	}
}

func TestParseMalformed(t *testing.T) {
	with := func(old, new string) map[string][]byte {
		if !strings.Contains(valid, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return map[string][]byte{Key: []byte(strings.Replace(valid, old, new, 1))}
	}
	cases := []struct {
		name, secret string
		data         map[string][]byte
		want         string
	}{
		{"not a meta-Secret name", "nginx-ingress", map[string][]byte{Key: []byte(valid)}, `does not end in ".poly"`},
		{"missing key", "nginx-ingress.poly", map[string][]byte{"other": []byte(valid)}, `data key "block.poly" is missing`},
		{"extra key", "nginx-ingress.poly", map[string][]byte{Key: []byte(valid), "extra": nil}, `unexpected data key "extra"`},
		{"empty", "nginx-ingress.poly", map[string][]byte{Key: {}}, "is empty"},
		{"too large", "nginx-ingress.poly", map[string][]byte{Key: []byte(strings.Repeat("#", MaxSize+1))}, "more than"},
		{"not YAML", "nginx-ingress.poly", map[string][]byte{Key: []byte("block: [unclosed")}, "not a valid document"},
		{"unknown field", "nginx-ingress.poly", with("  flavor: nginx\n", "  flavour: nginx\n"), "not a valid document"},
		{"wrong type", "nginx-ingress.poly", with("  version: 1.2.0\n", "  version: [1, 2]\n"), "not a valid document"},
		{"name mismatch", "other.poly", map[string][]byte{Key: []byte(valid)}, `does not match the Secret's name ("other.poly")`},
		{"bad block name", "Bad_Name.poly", with("  name: nginx-ingress\n", "  name: Bad_Name\n"), "not a DNS-1123 label"},
		{"missing block name", "nginx-ingress.poly", with("  name: nginx-ingress\n", ""), "block.name is required"},
		{"bad kind", "nginx-ingress.poly", with("  kind: helm\n", "  kind: external\n"), `block.kind "external" is not one of helm, polycrate`},
		{"missing kind", "nginx-ingress.poly", with("  kind: helm\n", ""), `block.kind "" is not one of`},
		{"chart without name", "nginx-ingress.poly", with("    name: ingress-nginx\n", ""), "block.chart.name is required"},
		{"missing workspace", "nginx-ingress.poly", with("  name: production\n", ""), "workspace.name is required"},
		{"missing organization", "nginx-ingress.poly", with("  organization: acme-corp\n", ""), "workspace.organization is required"},
		{"missing action name", "nginx-ingress.poly", with("  name: install\n", ""), "action.name is required"},
		{"bad action status", "nginx-ingress.poly", with("  status: success\n", "  status: done\n"), `action.status "done" is not one of success, running, failed`},
		{"missing timestamp", "nginx-ingress.poly", with(`  last_executed_at: "2025-12-20T10:00:00Z"`+"\n", ""), "action.last_executed_at is required"},
		{"bad timestamp", "nginx-ingress.poly", with(`"2025-12-20T10:00:00Z"`, `"yesterday"`), "not a valid document"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Parse(c.secret, c.data)
			if err == nil {
				t.Fatalf("accepted: %+v", m)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

// TestInstallationOf is the seed's table "Installation-Status Ableitung".
func TestInstallationOf(t *testing.T) {
	cases := []struct {
		name, status string
		want         Installation
	}{
		{"install", "success", Installation{Installed: true}},
		{"install", "running", Installation{Running: true}},
		{"install", "failed", Installation{Failed: true}},
		{"uninstall", "success", Installation{Uninstalled: true}},
		{"uninstall", "running", Installation{}},
		{"uninstall", "failed", Installation{}},
		{"backup", "success", Installation{}},
	}
	for _, c := range cases {
		if got := InstallationOf(Action{Name: c.name, Status: c.status}); got != c.want {
			t.Errorf("%s/%s = %+v, want %+v", c.name, c.status, got, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("nginx-ingress.poly", valid)
	f.Add("x.poly", "block: {name: x}")
	f.Fuzz(func(t *testing.T, name, doc string) {
		m, err := Parse(name, map[string][]byte{Key: []byte(doc)})
		if err == nil && (m.Block.Name != AppName(name) || m.Workspace.Name == "" || m.Action.LastExecutedAt.IsZero()) {
			t.Fatalf("accepted an invalid meta-Secret: %+v", m)
		}
	})
}
