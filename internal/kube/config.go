// Package kube loads the Kubernetes client configuration the way every command of
// the CLI does: --kubeconfig, else $KUBECONFIG, else ~/.kube/config, else in-cluster.
package kube

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"
)

// ConfigOptions tune the REST client configuration.
type ConfigOptions struct {
	// Kubeconfig is an explicit kubeconfig path; empty uses the defaults.
	Kubeconfig string
	// Context selects a kubeconfig context; empty uses the current one.
	Context string
	// QPS and Burst limit requests to the Kubernetes API (per resource kind, as
	// client-go counts); zero keeps client-go's defaults, a negative QPS turns
	// client-side throttling off (the API server's Priority and Fairness remains).
	QPS   float32
	Burst int
	// UserAgent identifies the operator to the API server.
	UserAgent string
}

// RESTConfig loads the client configuration.
func RESTConfig(o ConfigOptions) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	if len(rules.Precedence) == 1 && rules.Precedence[0] == clientcmd.RecommendedHomeFile {
		// clientcmd resolves ~ once at program start; resolve it now so $HOME is honoured.
		rules.Precedence = []string{filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) || errors.Is(err, clientcmd.ErrEmptyConfig) {
			return nil, errors.New("no Kubernetes configuration found: pass --kubeconfig, set $KUBECONFIG, create ~/.kube/config, or run inside a cluster")
		}
		if o.Kubeconfig != "" {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", o.Kubeconfig, err)
		}
		return nil, fmt.Errorf("loading Kubernetes configuration: %w", err)
	}
	if o.QPS != 0 {
		cfg.QPS = o.QPS
	}
	if o.Burst > 0 {
		cfg.Burst = o.Burst
	}
	if o.UserAgent != "" {
		cfg.UserAgent = o.UserAgent
	}
	return cfg, nil
}

// KubeconfigFile is the kubeconfig file RESTConfig reads for these options: the
// explicit path, else the first existing file of $KUBECONFIG or
// ~/.kube/config; "" means in-cluster (for servers that take a path, such as the
// DNS01 webhook's delegated authentication).
func KubeconfigFile(o ConfigOptions) string {
	if o.Kubeconfig != "" {
		return o.Kubeconfig
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if len(rules.Precedence) == 1 && rules.Precedence[0] == clientcmd.RecommendedHomeFile {
		rules.Precedence = []string{filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
	}
	for _, p := range rules.Precedence {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}
