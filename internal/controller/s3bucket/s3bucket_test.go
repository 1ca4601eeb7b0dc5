package s3bucket_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/controller/s3bucket"
	"github.com/polycrate/polycrate-operator/internal/emulator"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
	"github.com/polycrate/polycrate-operator/internal/testutil/specs"
)

// foreignSecret creates a Secret of a bucket's credentials name that no S3Bucket owns.
func foreignSecret(ns, bucket string) *corev1.Secret {
	GinkgoHelper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s3bucket.SecretName(bucket)},
		StringData: map[string]string{"note": "hands off"}}
	Expect(k8s.Create(ctx, s)).To(Succeed())
	return s
}

func bucketCR(ns, name, bucket, region, reclaim string) *v1.S3Bucket {
	return &v1.S3Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.S3BucketSpec{Name: bucket, Region: region, ReclaimPolicy: reclaim}}
}

// phase waits for a phase and returns the CR.
func phase(b *v1.S3Bucket, want string) *v1.S3Bucket {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
		g.Expect(b.Status.Phase).To(Equal(want), "message: %s", b.Status.Message)
	}, timeout, poll).Should(Succeed())
	return b
}

func reason(b *v1.S3Bucket) string {
	c := meta.FindStatusCondition(b.Status.Conditions, v1.ConditionReady)
	if c == nil {
		return ""
	}
	return c.Reason
}

func secretOf(b *v1.S3Bucket) *corev1.Secret {
	GinkgoHelper()
	s := &corev1.Secret{}
	Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: s3bucket.SecretName(b.Spec.Name)}, s)
	}, timeout, poll).Should(Succeed())
	return s
}

func noSecret(b *v1.S3Bucket) {
	GinkgoHelper()
	Eventually(func() bool {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: s3bucket.SecretName(b.Spec.Name)}, &corev1.Secret{})
		return err != nil && client.IgnoreNotFound(err) == nil
	}, timeout, poll).Should(BeTrue())
}

func gone(b *v1.S3Bucket) {
	GinkgoHelper()
	Eventually(func() bool {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(b), &v1.S3Bucket{})
		return err != nil && client.IgnoreNotFound(err) == nil
	}, timeout, poll).Should(BeTrue())
}

func bucketsNamed(name string) []polycrate.BucketRow {
	GinkgoHelper()
	rows, err := apiClient().Buckets().List(ctx, polycrate.Query("name_exact", name))
	Expect(err).NotTo(HaveOccurred())
	return rows
}

func eventReasons(b *v1.S3Bucket) []string {
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(b.Namespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == b.Name && e.Regarding.Kind == "S3Bucket" {
			out = append(out, e.Reason)
		}
	}
	return out
}

// systemRequest calls the emulator with the system token (test set-up only).
func systemRequest(method, path string, body any) map[string]any {
	GinkgoHelper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, oe.APIURL+path, rd)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+emulator.DevSystemToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(BeNumerically("<", 300))
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out
}

// Ordered: the last spec searches the whole run's logs and events for credentials.
var _ = Describe("S3Bucket provisioning", Ordered, func() {
	It("provisions in the default region, writes exactly the seed's Secret, and passes Provisioning and WaitingForCredentials on the way", func() {
		ns := freshNamespace()
		// A slow create shows Provisioning; failing credential reads (the operator's
		// client does not retry: the work queue does) show WaitingForCredentials.
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/s3/buckets/", Method: "POST", LatencyMS: 1500, Times: 1},
			emulator.FaultRule{Path: "/api/v1/s3/buckets/*/credentials/", Method: "GET", Status: 503, Times: 2})).To(Succeed())
		DeferCleanup(func() { _ = api.SetFaults() })
		b := bucketCR(ns, "my-app-data", "my-app-data", "", "")
		Expect(k8s.Create(ctx, b)).To(Succeed())
		phase(b, v1.S3BucketPhaseProvisioning)
		phase(b, v1.S3BucketPhaseWaitingForCredentials)
		phase(b, v1.S3BucketPhaseReady)
		Expect(reason(b)).To(Equal("Ready"))
		Expect(b.Status.Region).To(Equal("fsn1")) // the API's default_s3_bucket_cluster
		Expect(b.Status.Endpoint).To(Equal("https://s3.fsn1.example.com"))
		Expect(b.Status.SecretName).To(Equal("s3-my-app-data-credentials"))
		Expect(b.Finalizers).To(ContainElement(v1.FinalizerS3BucketCleanup))

		s := secretOf(b)
		Expect(s.Type).To(Equal(corev1.SecretTypeOpaque))
		Expect(s.Labels).To(Equal(map[string]string{"polycrate_managed_by": "operator", "polycrate_object_type": "s3-credentials",
			"polycrate_s3_bucket_name": "my-app-data", "polycrate_s3_bucket_region": "fsn1"}))
		Expect(s.OwnerReferences).To(ConsistOf(SatisfyAll(HaveField("Kind", "S3Bucket"), HaveField("UID", b.UID))))
		Expect(s.Data).To(HaveLen(5))
		Expect(s.Data).To(HaveKey("AWS_ACCESS_KEY_ID"))
		Expect(s.Data).To(HaveKey("AWS_SECRET_ACCESS_KEY"))
		Expect(string(s.Data["S3_ENDPOINT"])).To(Equal("https://s3.fsn1.example.com"))
		Expect(string(s.Data["S3_REGION"])).To(Equal("fsn1"))
		Expect(string(s.Data["BUCKET_NAME"])).To(Equal("my-app-data"))
		creds, err := apiClient().BucketCredentials(ctx, b.Status.APIID)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(s.Data["AWS_ACCESS_KEY_ID"])).To(Equal(*creds[0].AccessKey))
		Expect(string(s.Data["AWS_SECRET_ACCESS_KEY"])).To(Equal(*creds[0].SecretKey))
		Expect(eventReasons(b)).To(ContainElements("BucketCreated", "SecretWritten", "Ready"))
		Expect(bucketsNamed("my-app-data")).To(HaveLen(1))
	})

	It("matches spec.region by name or region string, and refuses an unknown region listing the valid ones", func() {
		ns := freshNamespace()
		b := bucketCR(ns, "in-nbg", "in-nbg-bucket", "nbg1", "")
		Expect(k8s.Create(ctx, b)).To(Succeed())
		phase(b, v1.S3BucketPhaseReady)
		Expect(string(secretOf(b).Data["S3_ENDPOINT"])).To(Equal("https://s3.nbg1.example.com"))

		bad := bucketCR(ns, "on-mars", "on-mars-bucket", "mars1", "")
		Expect(k8s.Create(ctx, bad)).To(Succeed())
		phase(bad, v1.S3BucketPhaseError)
		Expect(reason(bad)).To(Equal(v1.ReasonUnknownRegion))
		Expect(bad.Status.Message).To(ContainSubstring(`region "mars1"`))
		Expect(bad.Status.Message).To(ContainSubstring("valid: fsn1, nbg1"))
		Expect(bucketsNamed("on-mars-bucket")).To(BeEmpty())
	})

	It("says Error for a name taken elsewhere, a full S3 cluster and a refused request", func() {
		ns := freshNamespace()
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/s3/buckets/", Method: "POST", Status: 409, Times: 1})).To(Succeed())
		taken := bucketCR(ns, "taken", "taken-bucket", "", "")
		Expect(k8s.Create(ctx, taken)).To(Succeed())
		phase(taken, v1.S3BucketPhaseError)
		Expect(reason(taken)).To(Equal(v1.ReasonBucketNameTaken))

		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/s3/buckets/", Method: "POST", Status: 400, Times: 1})).To(Succeed())
		refused := bucketCR(ns, "refused", "refused-bucket", "", "")
		Expect(k8s.Create(ctx, refused)).To(Succeed())
		phase(refused, v1.S3BucketPhaseError)
		Expect(reason(refused)).To(Equal(v1.ReasonAPIError))
		Expect(refused.Status.Message).To(ContainSubstring("the API refused the bucket"))
		// Error → Error with another reason is a transition too: its own Warning event.
		Expect(api.SetFaults(emulator.FaultRule{Path: "/api/v1/s3/buckets/", Method: "POST", Status: 403, Times: 1})).To(Succeed())
		refused.Spec.ReclaimPolicy = "delete"
		Expect(k8s.Update(ctx, refused)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(refused), refused)).To(Succeed())
			g.Expect(reason(refused)).To(Equal(v1.ReasonForbidden))
		}, timeout, poll).Should(Succeed())
		Eventually(func() []string { return eventReasons(refused) }, timeout, poll).Should(ContainElements(v1.ReasonAPIError, v1.ReasonForbidden))
		Expect(api.SetFaults()).To(Succeed())

		// nbg1 stops accepting buckets (S3_CLUSTER_MAX_USAGE_PERCENT in the real API).
		rows := systemRequest(http.MethodGet, "/api/v1/s3/clusters/?name_exact=nbg1", nil)["results"].([]any)
		id := rows[0].(map[string]any)["id"].(string)
		systemRequest(http.MethodPatch, "/api/v1/s3/clusters/"+id+"/", map[string]any{"allow_new_buckets": false})
		DeferCleanup(func() {
			systemRequest(http.MethodPatch, "/api/v1/s3/clusters/"+id+"/", map[string]any{"allow_new_buckets": true})
		})
		full := bucketCR(ns, "full", "full-bucket", "nbg1", "")
		Expect(k8s.Create(ctx, full)).To(Succeed())
		phase(full, v1.S3BucketPhaseError)
		Expect(reason(full)).To(Equal(v1.ReasonQuotaExceeded))
		Expect(eventReasons(full)).To(ContainElement(v1.ReasonQuotaExceeded))
	})

	It("adopts a bucket of that name and region the workspace already has: only the Secret is written", func() {
		ns := freshNamespace()
		existing, err := apiClient().CreateBucket(ctx, polycrate.BucketCreateRequest{Name: "adopt-me"})
		Expect(err).NotTo(HaveOccurred())
		b := bucketCR(ns, "adopt-me", "adopt-me", "fsn1", "")
		Expect(k8s.Create(ctx, b)).To(Succeed())
		phase(b, v1.S3BucketPhaseReady)
		Expect(b.Status.APIID).To(Equal(existing.ID))
		Expect(bucketsNamed("adopt-me")).To(HaveLen(1))
		Expect(eventReasons(b)).To(ContainElement(v1.ReasonAdopted))
		Expect(eventReasons(b)).NotTo(ContainElement("BucketCreated"))
	})

	It("keeps the API bucket with reclaim_policy retain and deletes it with delete; the Secret goes in both cases", func() {
		ns := freshNamespace()
		keep := bucketCR(ns, "keep", "keep-bucket", "", "retain")
		drop := bucketCR(ns, "drop", "drop-bucket", "", "delete")
		Expect(k8s.Create(ctx, keep)).To(Succeed())
		Expect(k8s.Create(ctx, drop)).To(Succeed())
		phase(keep, v1.S3BucketPhaseReady)
		phase(drop, v1.S3BucketPhaseReady)
		secretOf(keep)
		secretOf(drop)
		keepID, dropID := keep.Status.APIID, drop.Status.APIID

		Expect(k8s.Delete(ctx, keep)).To(Succeed())
		Expect(k8s.Delete(ctx, drop)).To(Succeed())
		gone(keep)
		gone(drop)
		noSecret(keep)
		noSecret(drop)
		kept, err := apiClient().Buckets().Get(ctx, keepID)
		Expect(err).NotTo(HaveOccurred())
		Expect(kept.IsDeleted).To(BeFalse())
		Eventually(func() bool {
			d, err := apiClient().Buckets().Get(ctx, dropID)
			return polycrate.IsNotFound(err) || (err == nil && d.IsDeleted)
		}, timeout, poll).Should(BeTrue())
	})

	It("restores the Secret after deletion and after tampering, and follows credentials rotated in the API", func() {
		ns := freshNamespace()
		b := bucketCR(ns, "guarded", "guarded-bucket", "", "")
		Expect(k8s.Create(ctx, b)).To(Succeed())
		phase(b, v1.S3BucketPhaseReady)
		orig := secretOf(b)
		key := string(orig.Data["AWS_SECRET_ACCESS_KEY"])

		Expect(k8s.Delete(ctx, orig)).To(Succeed())
		Eventually(func() string {
			s := &corev1.Secret{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(orig), s); err != nil || s.UID == orig.UID {
				return ""
			}
			return string(s.Data["AWS_SECRET_ACCESS_KEY"])
		}, timeout, poll).Should(Equal(key))

		s := secretOf(b)
		s.Data["AWS_SECRET_ACCESS_KEY"] = []byte("tampered")
		s.Data["EXTRA"] = []byte("x")
		Expect(k8s.Update(ctx, s)).To(Succeed())
		Eventually(func() map[string][]byte { return secretOf(b).Data }, timeout, poll).Should(SatisfyAll(
			HaveKeyWithValue("AWS_SECRET_ACCESS_KEY", []byte(key)), Not(HaveKey("EXTRA"))))

		// Rotation in the API reaches the Secret on the next pass (every 2 s in this suite).
		req, _ := http.NewRequest(http.MethodPost, oe.APIURL+"/_emulator/s3/buckets/"+b.Status.APIID+"/rotate-credentials", nil)
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(BeNumerically("<", 300))
		Eventually(func() string { return string(secretOf(b).Data["AWS_SECRET_ACCESS_KEY"]) }, timeout, poll).ShouldNot(Equal(key))
		creds, err := apiClient().BucketCredentials(ctx, b.Status.APIID)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(secretOf(b).Data["AWS_SECRET_ACCESS_KEY"])).To(Equal(*creds[0].SecretKey))
	})

	It("never overwrites a Secret of that name it does not own", func() {
		ns := freshNamespace()
		foreign := foreignSecret(ns, "mine-bucket")
		b := bucketCR(ns, "mine", "mine-bucket", "", "")
		Expect(k8s.Create(ctx, b)).To(Succeed())
		phase(b, v1.S3BucketPhaseError)
		Expect(reason(b)).To(Equal(v1.ReasonSecretForeign))
		s := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(foreign), s)).To(Succeed())
		Expect(s.Data).To(Equal(map[string][]byte{"note": []byte("hands off")}))
		// Checked before the create: no bucket that could never get its Secret.
		Expect(bucketsNamed("mine-bucket")).To(BeEmpty())
		// The foreign Secret goes: the bucket is provisioned.
		Expect(k8s.Delete(ctx, foreign)).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
		b.Spec.ReclaimPolicy = "delete" // a spec change wakes the refused bucket
		Expect(k8s.Update(ctx, b)).To(Succeed())
		phase(b, v1.S3BucketPhaseReady)
		Expect(bucketsNamed("mine-bucket")).To(HaveLen(1))
	})

	It("fires a Warning event when an Error changes its reason", func() {
		nsA, nsB := freshNamespace(), freshNamespace()
		winner := bucketCR(nsB, "winner", "contested-bucket", "", "retain")
		Expect(k8s.Create(ctx, winner)).To(Succeed())
		phase(winner, v1.S3BucketPhaseReady)
		foreignSecret(nsA, "contested-bucket")
		blocked := bucketCR(nsA, "blocked", "contested-bucket", "", "")
		Expect(k8s.Create(ctx, blocked)).To(Succeed())
		phase(blocked, v1.S3BucketPhaseError)
		Expect(reason(blocked)).To(Equal(v1.ReasonAlreadyClaimed))
		// The winner goes (its bucket stays): the other adopts it and stops at the
		// foreign Secret — Error → Error with another reason, its own Warning event.
		Expect(k8s.Delete(ctx, winner)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(blocked), blocked)).To(Succeed())
			g.Expect(reason(blocked)).To(Equal(v1.ReasonSecretForeign))
			g.Expect(blocked.Status.Phase).To(Equal(v1.S3BucketPhaseError))
		}, timeout, poll).Should(Succeed())
		Eventually(func() []string { return eventReasons(blocked) }, timeout, poll).Should(ContainElements(v1.ReasonAlreadyClaimed, v1.ReasonSecretForeign))
		Expect(k8s.Delete(ctx, blocked)).To(Succeed())
		gone(blocked)
	})

	It("refuses at the API server a name whose credentials Secret name would be invalid", func() {
		ns := freshNamespace()
		for _, name := range []string{"a..b-.-x", "ab.-c", "ab-.c", "ab..c"} {
			err := k8s.Create(ctx, bucketCR(ns, "bad", name, "", ""))
			Expect(err).To(HaveOccurred(), name)
			Expect(err.Error()).To(ContainSubstring("spec.name"), name)
		}
		Expect(bucketsNamed("a..b-.-x")).To(BeEmpty())
	})

	It("rejects changes of spec.name and spec.region at the API server", func() {
		ns := freshNamespace()
		b := bucketCR(ns, "fixed", "fixed-bucket", "fsn1", "")
		Expect(k8s.Create(ctx, b)).To(Succeed())
		phase(b, v1.S3BucketPhaseReady)
		b.Spec.Name = "renamed-bucket"
		err := k8s.Update(ctx, b)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.name is immutable"))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
		b.Spec.Region = "nbg1"
		err = k8s.Update(ctx, b)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.region is immutable"))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
		b.Spec.Region = ""
		Expect(k8s.Update(ctx, b)).NotTo(Succeed())
	})

	It("gives a second S3Bucket naming the same bucket an Error and leaves the first untouched", func() {
		nsA, nsB := freshNamespace(), freshNamespace()
		first := bucketCR(nsA, "shared", "shared-bucket", "", "")
		Expect(k8s.Create(ctx, first)).To(Succeed())
		phase(first, v1.S3BucketPhaseReady)
		rv := first.ResourceVersion
		second := bucketCR(nsB, "shared-too", "shared-bucket", "", "")
		Expect(k8s.Create(ctx, second)).To(Succeed())
		phase(second, v1.S3BucketPhaseError)
		Expect(reason(second)).To(Equal(v1.ReasonAlreadyClaimed))
		Expect(second.Status.Message).To(ContainSubstring("already claimed by S3Bucket " + nsA + "/shared"))
		noSecret(second)
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
		Expect(first.Status.Phase).To(Equal(v1.S3BucketPhaseReady))
		Expect(first.Spec).To(Equal(bucketCR(nsA, "shared", "shared-bucket", "", "retain").Spec))
		_ = rv
		// The first goes (retained): the second takes the bucket over.
		Expect(k8s.Delete(ctx, first)).To(Succeed())
		phase(second, v1.S3BucketPhaseReady)
		Expect(bucketsNamed("shared-bucket")).To(HaveLen(1))
	})

	It("waits in Pending while provisioning is switched off", func() {
		ns := freshNamespace()
		specs.UpdateOperatorConfig(k8s, func(oc *v1.OperatorConfig) { oc.Spec.S3BucketProvisioning.Enabled = new(bool) })
		b := bucketCR(ns, "later", "later-bucket", "", "")
		Expect(k8s.Create(ctx, b)).To(Succeed())
		phase(b, v1.S3BucketPhasePending)
		Expect(reason(b)).To(Equal(v1.ReasonDisabled))
		Consistently(func() []polycrate.BucketRow { return bucketsNamed("later-bucket") }, 2*time.Second, 200*time.Millisecond).Should(BeEmpty())
		specs.UpdateOperatorConfig(k8s, func(oc *v1.OperatorConfig) { oc.Spec.S3BucketProvisioning.Enabled = nil })
		phase(b, v1.S3BucketPhaseReady)
	})

	It("leaves no credential in any log line, event, condition or status of the whole run", func() {
		ns := freshNamespace()
		b := bucketCR(ns, "leak-check", "leak-check-bucket", "", "delete")
		Expect(k8s.Create(ctx, b)).To(Succeed())
		phase(b, v1.S3BucketPhaseReady)

		var secrets []string
		list := &corev1.SecretList{}
		Expect(k8s.List(ctx, list)).To(Succeed())
		for _, s := range list.Items {
			if s.Labels[v1.LabelObjectType] == v1.ObjectTypeCredentials {
				secrets = append(secrets, string(s.Data["AWS_ACCESS_KEY_ID"]), string(s.Data["AWS_SECRET_ACCESS_KEY"]))
			}
		}
		Expect(secrets).NotTo(BeEmpty())

		var haystack strings.Builder
		haystack.WriteString(logged())
		events := &eventsv1.EventList{}
		Expect(k8s.List(ctx, events)).To(Succeed())
		for _, e := range events.Items {
			haystack.WriteString(e.Note + "\n" + e.Reason + "\n")
		}
		buckets := &v1.S3BucketList{}
		Expect(k8s.List(ctx, buckets)).To(Succeed())
		for _, x := range buckets.Items {
			st, _ := json.Marshal(x.Status)
			haystack.Write(st)
		}
		all := haystack.String()
		Expect(len(all)).To(BeNumerically(">", 1000), "the logs were not captured")
		for _, v := range secrets {
			Expect(v).NotTo(BeEmpty())
			Expect(strings.Contains(all, v)).To(BeFalse(), "a credential appears in logs, events or status")
		}
		Expect(k8s.Delete(ctx, b)).To(Succeed())
		gone(b)
		_ = time.Second
	})
})
