package s3bucket_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

var (
	oe  *testutil.OperatorEnv
	k8s client.Client
	api *emulator.Server
	ctx = context.Background()

	// logs holds everything the operator logged in this suite (the secrets test
	// searches it).
	logs   bytes.Buffer
	logsMu sync.Mutex
)

func TestS3Buckets(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "S3Bucket provisioning (envtest + emulator)")
}

// Everything the operator logs is kept for the secrets test, and shown as usual.
var _ = specs.OperatorSuite(testutil.OperatorEnvOptions{S3Resync: 2 * time.Second, Log: funcr.New(func(prefix, args string) {
	logsMu.Lock()
	fmt.Fprintln(&logs, prefix, args)
	logsMu.Unlock()
	fmt.Fprintln(GinkgoWriter, prefix, args)
}, funcr.Options{Verbosity: 10})}, func(e *testutil.OperatorEnv) {
	oe, k8s, api = e, e.K8s, e.API
})

func freshNamespace() string { return specs.Namespace(k8s, "s3") }

func apiClient() *polycrate.Client { return oe.Client() }

func systemClient() *polycrate.Client {
	c, _ := polycrate.New(polycrate.Options{BaseURL: oe.APIURL, Token: polycrate.StaticToken(emulator.DevSystemToken)})
	return c
}

func logged() string {
	logsMu.Lock()
	defer logsMu.Unlock()
	return logs.String()
}
