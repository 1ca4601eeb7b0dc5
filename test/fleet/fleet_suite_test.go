// Package fleet rolls a new operator version across a simulated fleet (seed 000
// "Operator-Deployment"): real operators — the built binary — on envtest control
// planes of their own, and light simulated cluster agents (health reports and
// the polycrate-operator app's version only), all against one API emulator.
// `make fleet` runs a big fleet; `make test` a reduced one.
package fleet

import (
	"flag"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var (
	flagReal       = flag.Int("fleet.real", 2, "real clusters: envtest control planes, each running the operator binary")
	flagSimulated  = flag.Int("fleet.simulated", 6, "simulated cluster agents (health reports and app versions)")
	flagPercentage = flag.Float64("fleet.percentage", 25, "OPERATOR_ROLLOUT_PERCENTAGE of the rollout")
)

func TestFleet(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Fleet rollout: real operators on envtest and simulated agents against one emulator")
}
