package inventory

import (
	"strconv"
	"strings"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/liveconfig"
	"github.com/polycrate/polycrate-operator/internal/names"
)

// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch

// CRDCertificate is cert-manager's Certificate CRD.
const CRDCertificate = "certificates.cert-manager.io"

// ExpiringSoon is how close to NotAfter a ready certificate is "expiring_soon".
const ExpiringSoon = 30 * 24 * time.Hour

// CertificateStatusAt is the seed's status table at a moment: Ready=True →
// ready, expiring_soon (NotAfter within 30 days) or expired (NotAfter passed);
// Ready=False → failed (reason Failed, or the Issuing condition failed), expired
// (reason Expired), else pending; no Ready condition yet → pending. The second
// value is when the answer changes by time alone (0: never).
func CertificateStatusAt(c *certmanagerv1.Certificate, now time.Time) (string, bool, time.Duration) {
	var ready, issuing *certmanagerv1.CertificateCondition
	for i := range c.Status.Conditions {
		switch c.Status.Conditions[i].Type {
		case certmanagerv1.CertificateConditionReady:
			ready = &c.Status.Conditions[i]
		case certmanagerv1.CertificateConditionIssuing:
			issuing = &c.Status.Conditions[i]
		}
	}
	if ready == nil {
		return "pending", false, 0
	}
	if ready.Status != cmmeta.ConditionTrue {
		switch {
		case ready.Reason == "Failed" || (issuing != nil && issuing.Status == cmmeta.ConditionFalse && issuing.Reason == "Failed"):
			return "failed", false, 0
		case ready.Reason == "Expired":
			return "expired", false, 0
		}
		return "pending", false, 0
	}
	if c.Status.NotAfter == nil {
		return "ready", true, 0
	}
	notAfter := c.Status.NotAfter.Time
	switch {
	case !now.Before(notAfter):
		return "expired", true, 0
	case !now.Before(notAfter.Add(-ExpiringSoon)):
		return "expiring_soon", true, notAfter.Sub(now)
	}
	return "ready", true, notAfter.Add(-ExpiringSoon).Sub(now)
}

// Certificates maps cert-manager Certificates (seed 002 "Certificate Discovery")
// to Certificates of the seed's name: certmanager-<namespace>-<name>.
var Certificates = &Mirror[*certmanagerv1.Certificate]{Name: "certificate", Source: certmanagerv1.SchemeGroupVersion.WithKind("Certificate"),
	CRD: CRDCertificate, Target: &v1.Certificate{}, Enabled: certificateDiscovery, StaleMinutes: certificateStale,
	TargetKey: func(src types.NamespacedName) types.NamespacedName {
		return types.NamespacedName{Namespace: src.Namespace, Name: names.DNS("certmanager", src.Namespace, src.Name)}
	}, Declare: declareCertificate}

func certificateDiscovery(s *liveconfig.Snapshot) bool {
	return liveconfig.Enabled(s.Spec.CertificateDiscovery.Enabled)
}

func certificateStale(s *liveconfig.Snapshot) int32 {
	return s.Spec.CertificateDiscovery.StaleCleanupMinutes
}

// declareCertificate applies the namespace and issuer filters and maps the seed's table; it
// asks to be run again when the status changes by time alone.
func declareCertificate(c *certmanagerv1.Certificate, snap *liveconfig.Snapshot, now time.Time) (*Declared, bool, error) {
	cd := snap.Spec.CertificateDiscovery
	if !snap.CertificateNamespaces().Allows(c.Namespace) || !IssuerSelected(cd.IssuerFilter, c.Spec.IssuerRef.Name) {
		return nil, false, nil
	}
	spec, next := CertificateSpecAt(c, now)
	labels := map[string]string{v1.LabelOperatorDiscovered: v1.LabelValueTrue, v1.LabelCertificateReady: strconv.FormatBool(spec.IsReady)}
	for k, v := range labelIfValid(v1.LabelCertificateIssuer, c.Spec.IssuerRef.Name) {
		labels[k] = v
	}
	for k, v := range labelIfValid(v1.LabelCertificateSource, c.Name) {
		labels[k] = v
	}
	d := &Declared{Labels: labels, Spec: spec}
	if next > 0 {
		d.Requeue = next + time.Second
	}
	return d, true, nil
}

// IssuerSelected is issuer_filter: include_issuers (empty: all), minus exclude_issuers.
func IssuerSelected(f v1.IssuerFilter, issuer string) bool {
	for _, x := range f.ExcludeIssuers {
		if x == issuer {
			return false
		}
	}
	if len(f.IncludeIssuers) == 0 {
		return true
	}
	for _, x := range f.IncludeIssuers {
		if x == issuer {
			return true
		}
	}
	return false
}

// CertificateSpecAt is the mapping at a moment, and when it changes by time alone.
func CertificateSpecAt(c *certmanagerv1.Certificate, now time.Time) (v1.CertificateSpec, time.Duration) {
	status, ready, next := CertificateStatusAt(c, now)
	kind := strings.ToLower(c.Spec.IssuerRef.Kind)
	if kind == "" {
		kind = "issuer"
	}
	group := c.Spec.IssuerRef.Group
	if group == "" {
		group = "cert-manager.io"
	}
	display := c.Name
	if len(c.Spec.DNSNames) > 0 {
		display = c.Spec.DNSNames[0] + "-tls"
	}
	s := v1.CertificateSpec{Name: c.Name, DisplayName: display, Namespace: c.Namespace, SecretName: c.Spec.SecretName,
		DNSNames: c.Spec.DNSNames, IPAddresses: c.Spec.IPAddresses, IssuerName: c.Spec.IssuerRef.Name, IssuerKind: kind,
		IssuerGroup: group, CertificateStatus: status, IsReady: ready, NotBefore: timePtr(c.Status.NotBefore),
		NotAfter: timePtr(c.Status.NotAfter), RenewalTime: timePtr(c.Status.RenewalTime),
		SourceCertManager: &v1.CertManagerSource{Name: c.Name, Namespace: c.Namespace, UID: string(c.UID)}}
	if c.Status.Revision != nil {
		s.SourceCertManager.Revision = int64(*c.Status.Revision)
	}
	if kind != "issuer" && kind != "clusterissuer" {
		s.IssuerKind = "" // an external issuer kind: the API's enum has no value for it
	}
	return s, next
}
