// Package s3bucket provisions S3Bucket CRs through the Polycrate API and keeps
// their credentials Secret (seed 002 "S3Bucket Provisioning: CR → API → Secret";
// docs/s3buckets.md). Credentials never appear in logs, events, conditions or
// errors: they only travel from the API's credentials endpoint into the Secret.
package s3bucket

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/slimcache"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete

// The keys of the credentials Secret.
const (
	KeyAccessKeyID     = "AWS_ACCESS_KEY_ID"
	KeySecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	KeyEndpoint        = "S3_ENDPOINT"
	KeyRegion          = "S3_REGION"
	KeyBucketName      = "BUCKET_NAME"
)

// SecretName is the credentials Secret of a bucket: s3-<bucket-name>-credentials.
func SecretName(bucket string) string { return "s3-" + bucket + "-credentials" }

// Reconciler provisions one S3Bucket.
type Reconciler struct {
	controller.Deps               // Client: cached S3Buckets; all writes
	Reader          client.Reader // uncached: Secrets are never cached with their data
	// Secrets keeps the metadata of the Secrets S3Buckets control (a compact
	// store the caller runs; see OwnsSecret).
	Secrets *slimcache.Store[slimcache.Meta]
	// Resync is how often a Ready bucket compares its Secret with the API's
	// credentials (rotation, tampering the watch did not see); default 5 minutes.
	Resync time.Duration
	// SecretNamespaces are the namespaces the operator may write Secrets in (nil:
	// all; run --secret-namespaces). A bucket elsewhere is refused before the API
	// is asked: its credentials could never be written.
	SecretNamespaces []string
}

// secretsGranted: the operator may write Secrets in the namespace.
func (r *Reconciler) secretsGranted(namespace string) bool {
	return len(r.SecretNamespaces) == 0 || slices.Contains(r.SecretNamespaces, namespace)
}

// Reconcile runs the skeleton: get → deleting? → finalizer → claim → bucket →
// credentials → Secret, with one status patch at the end when something changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &v1.S3Bucket{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		patcher := r.StatusPatcher(b)
		res, released, err := r.finalize(ctx, b)
		if !released {
			_, perr := patcher.Patch(ctx, b)
			err = errors.Join(err, perr)
		}
		return res, err
	}
	if _, err := controller.EnsureFinalizer(ctx, r.Client, b, v1.FinalizerS3BucketCleanup); err != nil {
		return ctrl.Result{}, err
	}
	patcher := r.StatusPatcher(b)
	res, err := r.reconcile(ctx, b, patcher)
	if err != nil {
		res, err = r.fail(b, err)
	}
	_, perr := patcher.Done(ctx, b, err == nil && b.Status.Phase == v1.S3BucketPhaseReady)
	return res, errors.Join(err, perr)
}

func (r *Reconciler) reconcile(ctx context.Context, b *v1.S3Bucket, patcher *controller.StatusPatcher) (ctrl.Result, error) {
	if _, err := r.Snapshot("s3_bucket_provisioning", func(s *liveconfig.Snapshot) *bool { return s.Spec.S3BucketProvisioning.Enabled },
		"no bucket is provisioned"); err != nil {
		return ctrl.Result{}, err
	}
	c := r.Conn.Client()
	if c == nil {
		return ctrl.Result{}, controller.NotConnected
	}
	if errs := validation.IsDNS1123Subdomain(SecretName(b.Spec.Name)); len(errs) > 0 {
		// Checked before any API call: a bucket whose credentials can never be
		// written must not be created (the CRD's pattern refuses such names; this
		// covers CRs stored before it did).
		return ctrl.Result{}, controller.Permanent(v1.ReasonInvalidSpec, fmt.Sprintf("spec.name %q cannot be served: its credentials Secret name %q is invalid (%s)",
			b.Spec.Name, SecretName(b.Spec.Name), strings.Join(errs, "; ")))
	}
	if !r.secretsGranted(b.Namespace) {
		return ctrl.Result{}, controller.Permanent(v1.ReasonSecretNamespaceNotGranted, fmt.Sprintf(
			"the operator may not write Secrets in namespace %s (it is granted Secrets only in %s: run --secret-namespaces, chart value rbac.secretNamespaces); no bucket is created until it may write its credentials Secret here",
			b.Namespace, strings.Join(r.SecretNamespaces, ", ")))
	}
	if owner, err := r.claimedBy(ctx, b); err != nil {
		return ctrl.Result{}, err
	} else if owner != "" {
		return ctrl.Result{}, controller.Permanent(v1.ReasonAlreadyClaimed, fmt.Sprintf("bucket %q is already claimed by S3Bucket %s", b.Spec.Name, owner))
	}
	bucket, err := r.bucket(ctx, c, b, patcher)
	if err != nil {
		return ctrl.Result{}, err
	}
	creds, err := c.BucketCredentials(ctx, bucket.ID)
	switch {
	case polycrate.IsNotFound(err):
		r.event(b, corev1.EventTypeWarning, v1.ReasonRecreated, fmt.Sprintf("bucket %s was deleted in the API; provisioning it again", bucket.ID))
		b.Status.APIID = ""
		return ctrl.Result{RequeueAfter: controller.RequeueShortly}, nil
	case err != nil:
		r.setPhase(b, v1.S3BucketPhaseWaitingForCredentials, v1.ReasonWaitingForCredentials, "bucket "+bucket.ID+" exists; reading its credentials failed: "+err.Error())
		o := controller.Classify(err) // backoff, or the wait the API asked for
		return o.Result, o.Err
	}
	cred := primary(creds)
	if cred == nil {
		r.setPhase(b, v1.S3BucketPhaseWaitingForCredentials, v1.ReasonWaitingForCredentials, "bucket "+bucket.ID+" exists; its credentials are not issued yet")
		return ctrl.Result{RequeueAfter: controller.RequeueIssuing}, nil
	}
	wrote, err := r.writeSecret(ctx, b, bucket, cred)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wrote || b.Status.Phase != v1.S3BucketPhaseReady || b.Status.LastSyncedAt == nil {
		now := metav1.Now() // only when something was written: a steady bucket writes nothing
		b.Status.LastSyncedAt = &now
	}
	if p := b.Status.Phase; p != v1.S3BucketPhaseReady {
		r.event(b, corev1.EventTypeNormal, "Ready", fmt.Sprintf("bucket %s is ready; credentials in Secret %s", b.Spec.Name, SecretName(b.Spec.Name)))
	}
	r.setPhase(b, v1.S3BucketPhaseReady, "Ready", fmt.Sprintf("bucket %s (%s) is ready; credentials in Secret %s", b.Spec.Name, bucket.ID, SecretName(b.Spec.Name)))
	return ctrl.Result{RequeueAfter: cmp.Or(r.Resync, controller.RequeueResync)}, nil
}

// regionOf is the API id of the S3 region spec.region names (by name or
// region code; nil when none is asked for); an unknown region is permanent.
func regionOf(ctx context.Context, c *polycrate.Client, want string) (*string, error) {
	if want == "" {
		return nil, nil
	}
	regions, err := c.Regions(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	var regionID *string
	for _, reg := range regions {
		names = append(names, reg.Name)
		if reg.Name == want || (reg.Region != nil && *reg.Region == want) {
			id := reg.ID
			regionID = &id
		}
	}
	if regionID == nil {
		slices.Sort(names)
		return nil, controller.Permanent(v1.ReasonUnknownRegion, fmt.Sprintf("region %q is not an S3 region of the Polycrate API; valid: %s", want, strings.Join(names, ", ")))
	}
	return regionID, nil
}

// bucket returns the API bucket of the CR: the one it already has, else an
// existing one of the same name and region (adopt), else a new one.
func (r *Reconciler) bucket(ctx context.Context, c *polycrate.Client, b *v1.S3Bucket, patcher *controller.StatusPatcher) (*polycrate.Bucket, error) {
	if id := b.Status.APIID; id != "" {
		got, err := c.Buckets().Get(ctx, id)
		switch {
		case err == nil && !got.IsDeleted:
			r.observe(b, got)
			return got, nil
		case err != nil && !polycrate.IsNotFound(err):
			return nil, err
		}
		r.event(b, corev1.EventTypeWarning, v1.ReasonRecreated, fmt.Sprintf("bucket %s was deleted in the API; provisioning it again", id))
		b.Status.APIID = ""
	}
	regionID, err := regionOf(ctx, c, b.Spec.Region)
	if err != nil {
		return nil, err
	}
	row, err := c.FindBucket(ctx, b.Spec.Name)
	if err != nil {
		return nil, err
	}
	if row != nil {
		if regionID != nil && (row.Region == nil || row.Region.ID != *regionID) {
			return nil, controller.Permanent(v1.ReasonBucketNameTaken, fmt.Sprintf("this workspace has a bucket %q in another region; it is not adopted", b.Spec.Name))
		}
		got, err := c.Buckets().Get(ctx, row.ID)
		if err != nil {
			return nil, err
		}
		r.event(b, corev1.EventTypeNormal, v1.ReasonAdopted, fmt.Sprintf("adopted the existing bucket %s (%s)", b.Spec.Name, row.ID))
		b.Status.APIID = row.ID
		r.observe(b, got)
		return got, nil
	}
	// Everything that would doom the bucket is checked before it is created: a
	// Secret of its credentials' name that this S3Bucket does not own would leave a
	// created, unusable bucket behind.
	if err := r.secretFree(ctx, b); err != nil {
		return nil, err
	}
	// Provisioning: a status write outside the deferred patch, because it must be
	// visible before the (possibly slow) create.
	r.setPhase(b, v1.S3BucketPhaseProvisioning, v1.ReasonProvisioning, "creating bucket "+b.Spec.Name+" in the Polycrate API")
	if _, err := patcher.Patch(ctx, b); err != nil {
		r.Log.V(1).Info("cannot show the Provisioning phase", "error", err.Error())
	}
	created, err := c.CreateBucket(ctx, polycrate.BucketCreateRequest{Name: b.Spec.Name, Region: regionID,
		Labels: map[string]string{"polycrate_source_namespace": b.Namespace, "polycrate_source_name": b.Name}})
	switch {
	case polycrate.IsConflict(err):
		return nil, controller.Permanent(v1.ReasonBucketNameTaken, fmt.Sprintf("bucket name %q is taken (by another workspace or on this S3 cluster); choose another name", b.Spec.Name))
	case polycrate.IsValidation(err) && strings.Contains(err.Error(), "new buckets"):
		return nil, controller.Permanent(v1.ReasonQuotaExceeded, "the S3 cluster accepts no new buckets (quota or capacity): "+err.Error())
	case polycrate.IsValidation(err):
		return nil, controller.Permanent(v1.ReasonAPIError, "the API refused the bucket: "+err.Error())
	case err != nil:
		return nil, err
	}
	r.event(b, corev1.EventTypeNormal, v1.ReasonBucketCreated, fmt.Sprintf("created bucket %s (%s)", b.Spec.Name, created.ID))
	b.Status.APIID = created.ID
	got, err := c.Buckets().Get(ctx, created.ID)
	if err != nil {
		return nil, err
	}
	r.observe(b, got)
	return got, nil
}

func (r *Reconciler) observe(b *v1.S3Bucket, got *polycrate.Bucket) {
	b.Status.Endpoint = ptr.Deref(got.S3Endpoint, "")
	b.Status.Region = b.Spec.Region
	if b.Status.Region == "" {
		b.Status.Region = ptr.Deref(got.S3Region, "")
	}
	b.Status.SecretName = SecretName(b.Spec.Name)
}

func primary(creds []polycrate.BucketCredential) *polycrate.BucketCredential {
	var first *polycrate.BucketCredential
	for i := range creds {
		c := &creds[i]
		if c.AccessKey == nil || c.SecretKey == nil || *c.AccessKey == "" || *c.SecretKey == "" {
			continue
		}
		if c.Type == "primary" {
			return c
		}
		if first == nil {
			first = c
		}
	}
	return first
}

// writeSecret makes the credentials Secret exactly what it should be: created
// when missing, restored when edited, updated when the API rotated the keys. A
// Secret of that name the bucket does not own is never overwritten.
func (r *Reconciler) writeSecret(ctx context.Context, b *v1.S3Bucket, bucket *polycrate.Bucket, cred *polycrate.BucketCredential) (bool, error) {
	want := map[string][]byte{
		KeyAccessKeyID: []byte(*cred.AccessKey), KeySecretAccessKey: []byte(*cred.SecretKey),
		KeyEndpoint: []byte(b.Status.Endpoint), KeyRegion: []byte(ptr.Deref(bucket.S3Region, "")), KeyBucketName: []byte(b.Spec.Name),
	}
	labels := map[string]string{v1.LabelManagedBy: v1.ManagedByOperator, v1.LabelObjectType: v1.ObjectTypeCredentials,
		v1.LabelS3BucketName: b.Spec.Name}
	if reg := b.Status.Region; reg != "" {
		labels[v1.LabelS3BucketRegion] = reg
	}
	owner := metav1.OwnerReference{APIVersion: v1.GroupVersion.String(), Kind: "S3Bucket", Name: b.Name, UID: b.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	s := &corev1.Secret{}
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: SecretName(b.Spec.Name)}, s)
	if apierrors.IsNotFound(err) {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: SecretName(b.Spec.Name), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{owner}}, Type: corev1.SecretTypeOpaque, Data: want}
		if err := r.Client.Create(ctx, s); err != nil {
			return false, fmt.Errorf("creating Secret %s: %w", s.Name, scrub(err))
		}
		r.event(b, corev1.EventTypeNormal, v1.ReasonSecretWritten, "wrote the credentials Secret "+s.Name)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading Secret %s: %w", SecretName(b.Spec.Name), scrub(err))
	}
	if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != b.UID {
		return false, controller.Permanent(v1.ReasonSecretForeign, fmt.Sprintf("Secret %s exists and is not owned by this S3Bucket; it is not overwritten", s.Name))
	}
	if maps.EqualFunc(s.Data, want, func(a, b []byte) bool { return string(a) == string(b) }) && hasLabels(s.Labels, labels) && s.Type == corev1.SecretTypeOpaque {
		return false, nil
	}
	s.Data, s.StringData = want, nil
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	maps.Copy(s.Labels, labels)
	if err := r.Client.Update(ctx, s); err != nil {
		return false, fmt.Errorf("updating Secret %s: %w", s.Name, scrub(err))
	}
	r.event(b, corev1.EventTypeNormal, v1.ReasonSecretWritten, "restored the credentials Secret "+s.Name+" from the API")
	return true, nil
}

// secretFree fails when the credentials Secret exists and another owner controls it.
func (r *Reconciler) secretFree(ctx context.Context, b *v1.S3Bucket) error {
	s := &corev1.Secret{}
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: SecretName(b.Spec.Name)}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading Secret %s: %w", SecretName(b.Spec.Name), scrub(err))
	}
	if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != b.UID {
		return controller.Permanent(v1.ReasonSecretForeign, fmt.Sprintf("Secret %s exists and is not owned by this S3Bucket; it is not overwritten, and no bucket is created until it is gone", s.Name))
	}
	return nil
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// scrub keeps only the kind and reason of a Kubernetes error writing a Secret: an
// admission webhook's message could echo the object.
func scrub(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return fmt.Errorf("%s (HTTP %d)", st.Status().Reason, st.Status().Code)
	}
	return errors.New("request failed")
}

// claimedBy names an S3Bucket (any namespace) declaring the same bucket name and
// region that ranks before this one.
func (r *Reconciler) claimedBy(ctx context.Context, b *v1.S3Bucket) (string, error) {
	list := &v1.S3BucketList{}
	if err := r.Client.List(ctx, list); err != nil {
		return "", err
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == b.UID || o.Spec.Name != b.Spec.Name || o.Spec.Region != b.Spec.Region || !o.DeletionTimestamp.IsZero() {
			continue
		}
		if older(o, b) {
			return o.Namespace + "/" + o.Name, nil
		}
	}
	return "", nil
}

// older ranks claims: the one that already holds the API bucket, then the older
// one (creation time has second precision), then namespace/name.
func older(a, b *v1.S3Bucket) bool {
	if (a.Status.APIID != "") != (b.Status.APIID != "") {
		return a.Status.APIID != ""
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// finalize: reclaim_policy delete deletes the API bucket (404 counts as done),
// retain keeps it; the Secret goes in both cases. released: the finalizer is gone.
func (r *Reconciler) finalize(ctx context.Context, b *v1.S3Bucket) (ctrl.Result, bool, error) {
	if !controllerutil.ContainsFinalizer(b, v1.FinalizerS3BucketCleanup) {
		return ctrl.Result{}, true, nil
	}
	if id := b.Status.APIID; id != "" {
		if b.Spec.ReclaimPolicy == "delete" {
			c := r.Conn.Client()
			if c == nil {
				r.pending(b, v1.ReasonDeleting, "waiting for the Polycrate API connection to delete bucket "+id)
				return ctrl.Result{RequeueAfter: controller.RequeueNotConnected}, false, nil
			}
			if err := polycrate.IgnoreNotFound(c.Buckets().Delete(ctx, id)); err != nil {
				if errors.Is(err, polycrate.ErrFenced) {
					return ctrl.Result{RequeueAfter: controller.RequeueShortly}, false, nil // not sent; see controller.Classify
				}
				if polycrate.IsTransient(err) {
					return ctrl.Result{}, false, err
				}
				msg := "cannot delete bucket " + id + ": " + err.Error()
				if r.setPhase(b, v1.S3BucketPhaseError, v1.ReasonAPIError, msg) {
					r.events().Failure(b, v1.ReasonAPIError, msg)
				}
				return ctrl.Result{RequeueAfter: controller.RequeueFailedStep}, false, nil
			}
			r.event(b, corev1.EventTypeNormal, v1.ReasonBucketDeleted, fmt.Sprintf("deleted bucket %s (%s) (reclaim_policy delete)", b.Spec.Name, id))
		} else {
			r.event(b, corev1.EventTypeNormal, v1.ReasonBucketKept, fmt.Sprintf("kept bucket %s (%s) (reclaim_policy retain)", b.Spec.Name, id))
		}
	}
	s := &corev1.Secret{}
	var err error = apierrors.NewNotFound(corev1.Resource("secrets"), SecretName(b.Spec.Name)) // never written where not granted
	if r.secretsGranted(b.Namespace) {
		err = r.Reader.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: SecretName(b.Spec.Name)}, s)
	}
	switch {
	case err == nil:
		if ref := metav1.GetControllerOf(s); ref != nil && ref.UID == b.UID {
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, s)); err != nil {
				return ctrl.Result{}, false, fmt.Errorf("deleting Secret %s: %w", s.Name, scrub(err))
			}
		}
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, false, fmt.Errorf("reading Secret %s: %w", SecretName(b.Spec.Name), scrub(err))
	}
	return ctrl.Result{}, true, controller.RemoveFinalizer(ctx, r.Client, b, v1.FinalizerS3BucketCleanup)
}

// fail records an error by its nature (controller.Classify): bad input → Error,
// and wait for a change; an API outage → keep the phase, say why, back off.
func (r *Reconciler) fail(b *v1.S3Bucket, err error) (ctrl.Result, error) {
	o := controller.Classify(err)
	if !o.Failed { // a wait
		if o.Reason != "" {
			r.pending(b, o.Reason, o.Message)
		}
		return o.Result, o.Err
	}
	if controller.WaitsOnOutage(o.Reason) { // an outage, not the bucket's failure
		r.events().Ready(b, metav1.ConditionFalse, o.Reason, o.Message, true) // once per transition, not per retry
		return o.Result, o.Err
	}
	if r.setPhase(b, v1.S3BucketPhaseError, o.Reason, o.Message) {
		r.events().Failure(b, o.Reason, o.Message)
	}
	return o.Result, o.Err
}

func (r *Reconciler) pending(b *v1.S3Bucket, reason, msg string) {
	phase := b.Status.Phase
	if phase == "" || phase == v1.S3BucketPhaseError {
		phase = v1.S3BucketPhasePending
	}
	r.setPhase(b, phase, reason, msg)
}

func (r *Reconciler) events() controller.Events { return r.Events("Provision") }

func (r *Reconciler) event(b *v1.S3Bucket, typ, reason, msg string) {
	r.events().Event(b, typ, reason, msg)
}

// setPhase sets phase, message and the Ready condition; true when the phase or
// reason changed.
func (r *Reconciler) setPhase(b *v1.S3Bucket, phase, reason, msg string) bool {
	changed := b.Status.Phase != phase
	b.Status.Phase, b.Status.Message = phase, msg
	status := metav1.ConditionFalse
	if phase == v1.S3BucketPhaseReady {
		status = metav1.ConditionTrue
	}
	return r.events().Ready(b, status, reason, msg, false) || changed
}

// SetupWithManager watches S3Buckets (spec changes and deletion; a bucket's
// deletion also wakes the buckets it held a claim against), the credentials
// Secrets by metadata (through their owner reference), and configuration changes.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	waker := controller.NewWaker()
	if err := waker.WakeOnConfigChange(mgr, r.Config, func(ctx context.Context) ([]client.Object, error) {
		return controller.ListObjects(ctx, mgr.GetClient(), &v1.S3BucketList{}, client.UnsafeDisableDeepCopy)
	}); err != nil {
		return err
	}
	if err := waker.WakeOnRecovery(mgr, r.Conn, func(ctx context.Context) ([]client.Object, error) {
		return controller.ListObjects(ctx, mgr.GetClient(), &v1.S3BucketList{}, client.UnsafeDisableDeepCopy)
	}); err != nil {
		return err
	}
	sameName := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		b, ok := o.(*v1.S3Bucket)
		if !ok {
			return nil
		}
		list := &v1.S3BucketList{}
		if err := mgr.GetClient().List(ctx, list); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if list.Items[i].Spec.Name == b.Spec.Name && list.Items[i].UID != b.UID {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("s3bucket").
		For(&v1.S3Bucket{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1.S3Bucket{}, sameName, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false }, UpdateFunc: func(e event.UpdateEvent) bool {
				return !e.ObjectNew.GetDeletionTimestamp().IsZero()
			}, DeleteFunc: func(event.DeleteEvent) bool { return true }})).
		WatchesRawSource(&slimcache.Source[slimcache.Meta]{Store: r.Secrets, Map: secretToBucket}).
		WatchesRawSource(waker.Source()).
		WithOptions(r.Options()).
		Complete(r)
}

// OwnsSecret reports whether an S3Bucket controls a Secret: the credentials
// Secrets the secret store keeps for this controller.
func OwnsSecret(o metav1.Object) bool {
	c := metav1.GetControllerOfNoCopy(o)
	return c != nil && c.Kind == "S3Bucket" && strings.HasPrefix(c.APIVersion, v1.GroupVersion.Group+"/")
}

// secretToBucket maps a change of a credentials Secret (deleted, or changed by
// hand, its owner reference included) to the S3Bucket that controls or
// controlled it.
func secretToBucket(_ context.Context, e slimcache.Event[slimcache.Meta]) []reconcile.Request {
	var out []reconcile.Request
	for _, m := range []*slimcache.Meta{e.Old, e.New} {
		if m != nil && m.ControllerKind == "S3Bucket" && strings.HasPrefix(m.ControllerAPIVersion, v1.GroupVersion.Group+"/") {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.Namespace, Name: m.ControllerName}})
		}
	}
	return out
}
