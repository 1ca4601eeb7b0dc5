package annotations

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParseFor measures what discovery does per Ingress reconcile: parse the
// annotations (with a per-host JSON for every host) and derive each host's check.
func BenchmarkParseFor(b *testing.B) {
	for _, hosts := range []int{1, 20, 200} {
		names := make([]string, hosts)
		entries := make([]string, hosts)
		for i := range names {
			names[i] = fmt.Sprintf("app-%d.example.com", i)
			entries[i] = fmt.Sprintf(`%q: {"path": "/h%d", "expected_status": [200, 204], "timeout": 5, "port": 8443}`, names[i], i)
		}
		ann := map[string]string{
			Monitor: "true", Path: "/health", Timeout: "10", Interval: "60", ExpectedStatus: "200,301",
			TLS: "true", Port: "443", HostConfig: "{" + strings.Join(entries, ",") + "}",
		}
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, probs := Parse(ann)
				if len(probs) != 0 {
					b.Fatal(probs)
				}
				for _, h := range names {
					if c := s.For(h, Source{}); c.Port != 8443 {
						b.Fatalf("%s: %+v", h, c)
					}
				}
			}
		})
	}
}
