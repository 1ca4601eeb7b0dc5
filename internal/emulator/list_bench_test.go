package emulator

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkListAllPages: one full paged listing of n Endpoints, filtered by
// cluster, as the operator's self-repair pass reads it (page_size 500).
func BenchmarkListAllPages(b *testing.B) {
	for _, n := range []int{5000, 40000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			srv, err := New(Config{Seed: testSeed(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = srv.Close() }()
			cluster := "00000000-0000-4000-8000-000000000001"
			now := time.Now().UTC()
			objs := make([]*Object, n)
			for i := range objs {
				objs[i] = &Object{Resource: "endpoints", ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Data: map[string]any{
					"name": fmt.Sprintf("ep-%d", i), "remote_address": "x.example.com", "kind": "http", "k8s_cluster": cluster,
				}, CreatedAt: now, UpdatedAt: now}
			}
			if err := srv.store.Save(objs...); err != nil {
				b.Fatal(err)
			}
			h := srv.Handler()
			pages := (n + 499) / 500
			b.ResetTimer()
			for b.Loop() {
				for p := 1; p <= pages; p++ {
					req := httptest.NewRequest("GET", fmt.Sprintf("/api/v1/endpoints/?k8s_cluster=%s&page_size=500&page=%d", cluster, p), nil)
					req.Header.Set("Authorization", "Bearer "+DevSystemToken)
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("page %d: %d %s", p, rec.Code, rec.Body.String())
					}
				}
			}
		})
	}
}
