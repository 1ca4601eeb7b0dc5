package crds

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	polycratev1alpha1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// Action is what installing one CRD did (or, in a dry run, would do).
type Action string

// The three outcomes of installing a CRD.
const (
	Created   Action = "created"
	Updated   Action = "updated"
	Unchanged Action = "unchanged"
	// Skipped: a newer operator version installed this CRD; it is left as it is.
	Skipped Action = "skipped"
)

// VersionAnnotation records which operator version last installed a CRD.
const VersionAnnotation = "polycrate.io/operator-version"

// Result is the outcome for one CRD.
type Result struct {
	Name   string
	Kind   string
	Action Action
	// Reason explains a skipped CRD.
	Reason string
}

// InstallOptions tune Install.
type InstallOptions struct {
	// DryRun asks the API server to validate and default without persisting anything.
	DryRun bool
	// EstablishTimeout bounds the wait for every CRD to be Established (default 60 s).
	EstablishTimeout time.Duration
	// FieldOwner is the server-side-apply field manager (default polycrate-operator).
	FieldOwner string
	// Version is this operator's version: written to each CRD as VersionAnnotation,
	// and a CRD whose annotation names a newer version is skipped, never downgraded.
	// Versions that are not semantic versions (dev builds) never refuse.
	Version string
}

// Install applies the given CRDs with server-side apply (idempotent, taking
// ownership of the fields it declares), reports per CRD whether it was created,
// updated or unchanged, and waits until every one is Established. With DryRun,
// nothing is changed and nothing is waited for; the results say what would happen.
func Install(ctx context.Context, c client.Client, list []CRD, opts InstallOptions) ([]Result, error) {
	if opts.EstablishTimeout == 0 {
		opts.EstablishTimeout = 60 * time.Second
	}
	if opts.FieldOwner == "" {
		opts.FieldOwner = polycratev1alpha1.FieldOwner
	}
	// One CRD's apply and wait do not depend on another's: all ten at once take
	// the time of the slowest, not the sum (the operator's start, and so a
	// restart until idle, waits for them).
	type outcome struct {
		r   Result
		err error
	}
	out := make([]outcome, len(list))
	var wg sync.WaitGroup
	for i, crd := range list {
		wg.Go(func() {
			r, err := applyOne(ctx, c, crd, opts)
			if err == nil && !opts.DryRun {
				err = waitEstablished(ctx, c, r.Name, opts.EstablishTimeout)
			}
			out[i] = outcome{r, err}
		})
	}
	wg.Wait()
	results := make([]Result, 0, len(list))
	var first error
	for _, o := range out {
		if o.err != nil {
			first = cmp.Or(first, o.err)
			continue
		}
		results = append(results, o.r)
	}
	return results, first
}

// newerThan reports whether installed names a newer semantic version than ours.
func newerThan(installed, ours string) bool {
	iv, err1 := semver.NewVersion(installed)
	ov, err2 := semver.NewVersion(ours)
	return err1 == nil && err2 == nil && iv.GreaterThan(ov)
}

// droppedStoredVersions are the live CRD's stored versions the new one lacks.
func droppedStoredVersions(live, next *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range live.Status.StoredVersions {
		found := false
		for _, nv := range next.Spec.Versions {
			found = found || nv.Name == v
		}
		if !found {
			out = append(out, v)
		}
	}
	return out
}

func applyOne(ctx context.Context, c client.Client, crd CRD, opts InstallOptions) (Result, error) {
	res := Result{Name: crd.Object.Name, Kind: crd.Kind()}

	before := &apiextensionsv1.CustomResourceDefinition{}
	existed := true
	if err := c.Get(ctx, client.ObjectKey{Name: crd.Object.Name}, before); err != nil {
		if !apierrors.IsNotFound(err) {
			return res, fmt.Errorf("reading CRD %s: %w", crd.Object.Name, err)
		}
		existed = false
	}

	if existed && opts.Version != "" {
		if installed := before.Annotations[VersionAnnotation]; newerThan(installed, opts.Version) {
			res.Action = Skipped
			res.Reason = fmt.Sprintf("installed by operator %s, newer than this operator (%s); not downgraded", installed, opts.Version)
			return res, nil
		}
	}

	// Objects stored in a version this CRD no longer has would be unreadable: the
	// API server refuses such an update with a terse error; say it plainly instead.
	if existed {
		if dropped := droppedStoredVersions(before, crd.Object); len(dropped) > 0 {
			res.Action = Skipped
			res.Reason = fmt.Sprintf("this operator's CRD has no version %s, which objects are still stored in (status.storedVersions); "+
				"not applied: migrate the stored objects first, or run an operator version that serves it", strings.Join(dropped, ", "))
			return res, nil
		}
	}

	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(crd.Raw, &u.Object); err != nil {
		return res, fmt.Errorf("decoding CRD %s: %w", crd.Object.Name, err)
	}
	if opts.Version != "" {
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[VersionAnnotation] = opts.Version
		u.SetAnnotations(ann)
	}
	applyOpts := []client.ApplyOption{client.FieldOwner(opts.FieldOwner), client.ForceOwnership}
	if opts.DryRun {
		applyOpts = append(applyOpts, client.DryRunAll)
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), applyOpts...); err != nil {
		return res, fmt.Errorf("applying CRD %s: %w", crd.Object.Name, err)
	}
	if !existed {
		res.Action = Created
		return res, nil
	}

	after := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, after); err != nil {
		return res, fmt.Errorf("decoding applied CRD %s: %w", crd.Object.Name, err)
	}
	res.Action = Unchanged
	if !equality.Semantic.DeepEqual(before.Spec, after.Spec) ||
		!maps.Equal(before.Labels, after.Labels) || !maps.Equal(before.Annotations, after.Annotations) {
		res.Action = Updated
	}
	return res, nil
}

func waitEstablished(ctx context.Context, c client.Client, name string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range crd.Status.Conditions {
			switch cond.Type {
			case apiextensionsv1.Established:
				if cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
				last = "Established=" + string(cond.Status) + ": " + cond.Message
			case apiextensionsv1.NamesAccepted:
				if cond.Status == apiextensionsv1.ConditionFalse {
					return false, fmt.Errorf("CRD %s: names not accepted: %s", name, cond.Message)
				}
			}
		}
		return false, nil
	})
	if err != nil {
		if last != "" && (errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err)) {
			return fmt.Errorf("CRD %s not established after %s (%s)", name, timeout, last)
		}
		return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
	}
	return nil
}
