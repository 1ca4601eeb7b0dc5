package s3bucket

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

func TestClaimRanking(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Second))
	mk := func(ns, name string, created metav1.Time, id string) *v1.S3Bucket {
		b := &v1.S3Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: created}}
		b.Status.APIID = id
		return b
	}
	cases := []struct {
		name string
		a, b *v1.S3Bucket
		want bool
	}{
		{"holder beats newcomer though younger", mk("b", "x", t1, "id"), mk("a", "x", t0, ""), true},
		{"newcomer never beats holder", mk("a", "x", t0, ""), mk("b", "x", t1, "id"), false},
		{"older wins", mk("b", "x", t0, ""), mk("a", "x", t1, ""), true},
		{"same second: namespace/name", mk("a", "x", t0, ""), mk("b", "x", t0, ""), true},
		{"same second, reversed", mk("b", "x", t0, ""), mk("a", "x", t0, ""), false},
	}
	for _, c := range cases {
		if got := older(c.a, c.b); got != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
}

func TestPrimaryCredential(t *testing.T) {
	s := func(v string) *string { return &v }
	creds := []polycrate.BucketCredential{
		{ID: "1", Type: "additional", AccessKey: s("a1"), SecretKey: s("s1")},
		{ID: "2", Type: "primary", AccessKey: s("a2"), SecretKey: nil},
		{ID: "3", Type: "primary", AccessKey: s("a3"), SecretKey: s("s3")},
	}
	if p := primary(creds); p == nil || p.ID != "3" {
		t.Errorf("primary = %+v", p)
	}
	if p := primary(creds[:2]); p == nil || p.ID != "1" {
		t.Errorf("fallback = %+v", p)
	}
	if p := primary(creds[1:2]); p != nil {
		t.Errorf("incomplete = %+v", p)
	}
	if SecretName("my-app-data") != "s3-my-app-data-credentials" {
		t.Error("secret name")
	}
}
