package crds

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Report is what SelfInstall did, for the OperatorConfig's CRDsInstalled
// condition: a summary, the CRDs left as installed with their reasons, and the
// error of a failed apply the operator runs despite.
type Report struct {
	Version string
	Counts  map[Action]int
	// Skipped are "<crd>: <reason>" for CRDs left as installed.
	Skipped []string
	Err     error
}

// SelfInstall applies the embedded CRDs as the operator starts (seed 000
// "CRD-Synchronisation": a new operator version brings its new CRDs). It never
// deletes a CRD, never downgrades one a newer operator installed, and never
// drops a version objects are still stored in. A failure is fatal only when one
// of the operator's CRDs is missing or not established: with all of them in place
// the operator logs the failure and runs with what is installed. The report says
// what happened.
func SelfInstall(ctx context.Context, c client.Client, version string, log logr.Logger) (*Report, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	results, err := Install(ctx, c, all, InstallOptions{Version: version})
	rep := &Report{Version: version, Counts: map[Action]int{}, Err: err}
	for _, r := range results {
		rep.Counts[r.Action]++
		switch r.Action {
		case Created, Updated:
			log.Info("CRD "+string(r.Action), "crd", r.Name, "version", version)
		case Skipped:
			log.Info("CRD left as installed", "crd", r.Name, "reason", r.Reason)
			rep.Skipped = append(rep.Skipped, r.Name+": "+r.Reason)
		}
	}
	if err == nil {
		log.Info("CRDs in place", "created", rep.Counts[Created], "updated", rep.Counts[Updated],
			"unchanged", rep.Counts[Unchanged], "skipped", rep.Counts[Skipped])
		return rep, nil
	}
	for _, crd := range all {
		live := &apiextensionsv1.CustomResourceDefinition{}
		if gerr := c.Get(ctx, client.ObjectKey{Name: crd.Object.Name}, live); gerr != nil || !isEstablished(live) {
			return rep, fmt.Errorf("installing the operator's CRDs failed and %s is not installed: %w (grant the operator's ClusterRole create/patch on customresourcedefinitions, or install them with 'polycrate-operator install-crds')", crd.Object.Name, err)
		}
	}
	log.Error(err, "could not update the CRDs; running with the installed ones")
	return rep, nil
}

func isEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
