package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// DefaultHealthURL is where `health` looks for a locally running operator.
const DefaultHealthURL = "http://localhost:8081"

func newHealthCommand() *cobra.Command {
	var rawURL string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check the health of a running operator (its /healthz and /readyz probes)",
		Long: `Query the operator's health probe endpoint. Exits 0 only when both /healthz and /readyz
answer OK; otherwise prints which check failed and why, and exits non-zero.`,
		Example: `  polycrate-operator health
  polycrate-operator health --url http://polycrate-operator.polycrate:8081`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			base, err := url.Parse(strings.TrimRight(rawURL, "/"))
			if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
				return fmt.Errorf("invalid --url %q: want e.g. http://localhost:8081", rawURL)
			}
			hc := &http.Client{Timeout: timeout}
			out := cmd.OutOrStdout()
			var failed []string
			for _, probe := range []string{"healthz", "readyz"} {
				if err := checkProbe(cmd.Context(), hc, base, probe); err != nil {
					fmt.Fprintf(out, "%s: FAILED — %v\n", probe, err)
					failed = append(failed, probe)
					continue
				}
				fmt.Fprintf(out, "%s: ok\n", probe)
			}
			if len(failed) > 0 {
				return fmt.Errorf("operator at %s is not healthy: %s failed", base, strings.Join(failed, " and "))
			}
			fmt.Fprintf(out, "operator at %s is healthy\n", base)
			return nil
		},
	}
	cmd.Flags().StringVar(&rawURL, "url", DefaultHealthURL, "base URL of the operator's health probe endpoint (--health-probe-bind-address)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "timeout of each request")
	return cmd
}

func checkProbe(ctx context.Context, hc *http.Client, base *url.URL, probe string) error {
	u := base.JoinPath(probe)
	u.RawQuery = "verbose"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return describeDialError(err, base, hc.Timeout)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, failedChecks(string(body)))
	}
	return nil
}

// failedChecks extracts the "[-]name failed: reason" lines of a verbose probe answer.
func failedChecks(body string) string {
	var bad []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "[-]") {
			bad = append(bad, strings.TrimPrefix(line, "[-]"))
		}
	}
	if len(bad) == 0 {
		return strings.TrimSpace(body)
	}
	return strings.Join(bad, "; ")
}

func describeDialError(err error, base *url.URL, timeout time.Duration) error {
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("connection refused at %s: is the operator running, and is --url its --health-probe-bind-address?", base.Host)
	case errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("no answer from %s within %s", base.Host, timeout)
	default:
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			return fmt.Errorf("cannot resolve %s: %v", dnsErr.Name, dnsErr.Err)
		}
		return err
	}
}
