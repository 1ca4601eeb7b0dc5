package cli_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("health", func() {
	ctx := context.Background()

	It("fails with a clear message when nothing listens", func() {
		addr := freeAddr()
		out, _, err := execute(ctx, "health", "--url", "http://"+addr)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("not healthy"))
		Expect(out).To(ContainSubstring("healthz: FAILED"))
		Expect(out).To(ContainSubstring("connection refused at " + addr))
	})

	It("names the failed check and its reason", func() {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/healthz":
				fmt.Fprint(w, "ok")
			case "/readyz":
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprint(w, "[+]ping ok\n[-]cache-sync failed: informer cache not synced yet\nreadyz check failed\n")
			}
		}))
		defer srv.Close()
		out, _, err := execute(ctx, "health", "--url", srv.URL)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("readyz failed"))
		Expect(out).To(ContainSubstring("healthz: ok"))
		Expect(out).To(ContainSubstring("readyz: FAILED — HTTP 500: cache-sync failed: informer cache not synced yet"))
	})

	It("reports a timeout", func() {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		out, _, err := execute(ctx, "health", "--url", srv.URL, "--timeout", "200ms")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("no answer from"))
		Expect(out).To(ContainSubstring("within 200ms"))
	})

	It("rejects a URL that is not http(s)", func() {
		_, _, err := execute(ctx, "health", "--url", "localhost:8081")
		Expect(err).To(MatchError(ContainSubstring(`invalid --url "localhost:8081"`)))
	})

	It("succeeds against a healthy endpoint", func() {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
		defer srv.Close()
		out, _, err := execute(ctx, "health", "--url", srv.URL+"/", "--timeout", time.Second.String())
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("is healthy"))
	})
})
