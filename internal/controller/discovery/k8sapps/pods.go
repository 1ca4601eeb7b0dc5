package k8sapps

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/kube"
)

// States of a K8sApp, aggregated from its Pods (docs/k8sapps.md "State").
const (
	StateOK       = "OK"
	StateWarning  = "WARNING"
	StateCritical = "CRITICAL"
)

// Counted reports whether a Pod counts for its app's status (seed 002 "Pod-Status:
// Job- und CronJob-Pods ausgeschlossen"): only Pods of Deployments (owned by a
// ReplicaSet that carries the Deployment controller's pod-template-hash label),
// StatefulSets and DaemonSets. Job and CronJob Pods, bare Pods and Pods of other
// controllers never count, nor do Pods that completed or are being deleted.
func Counted(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		switch o.Kind {
		case "StatefulSet", "DaemonSet", "Deployment":
			return true
		case "ReplicaSet":
			_, fromDeployment := p.Labels[kube.PodLabelTemplateHash]
			return fromDeployment
		}
		return false
	}
	return false
}

// PodDetail is one Pod in the API's pods_details.
type PodDetail struct {
	Name       string            `json:"name"`
	Status     string            `json:"status"`
	Ready      bool              `json:"ready"`
	Restarts   int32             `json:"restarts"`
	Containers []ContainerDetail `json:"containers"`
}

// ContainerDetail is one container of a Pod.
type ContainerDetail struct {
	Name     string `json:"name"`
	Image    string `json:"image"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
}

// Summary is the pod part of a K8sApp.
type Summary struct {
	Total, Ready, Available, Unavailable, Restarts int32
	State                                          string
	Artifacts                                      []v1.K8sAppArtifact
	Details                                        []PodDetail
	// Hash changes whenever any detail changes (the API's pods_status_hash).
	Hash string
}

// Summarize aggregates counted Pods (the PodStore keeps no others).
func Summarize(pods []*Pod) Summary {
	var s Summary
	images := map[string]int32{}
	for _, p := range pods {
		d := detail(p)
		s.Details = append(s.Details, d)
		s.Total++
		s.Restarts += d.Restarts
		if d.Ready {
			s.Ready++
			if p.Phase.Value() == corev1.PodRunning {
				s.Available++
			}
		}
		seen := map[string]bool{}
		for _, c := range p.Containers {
			if img := c.Image.Value(); !seen[img] {
				seen[img] = true
				images[img]++
			}
		}
	}
	s.Unavailable = s.Total - s.Available
	sort.Slice(s.Details, func(i, j int) bool { return s.Details[i].Name < s.Details[j].Name })
	for img, n := range images {
		s.Artifacts = append(s.Artifacts, v1.K8sAppArtifact{Name: ArtifactName(img), Image: img, PodCount: n})
	}
	sort.Slice(s.Artifacts, func(i, j int) bool { return s.Artifacts[i].Image < s.Artifacts[j].Image })
	switch {
	case s.Total == 0:
		s.State = StateWarning // no workload Pod at all
	case s.Ready == s.Total:
		s.State = StateOK
	case s.Ready == 0:
		s.State = StateCritical
	default:
		s.State = StateWarning
	}
	b, _ := json.Marshal(s.Details)
	sum := sha256.Sum256(b)
	s.Hash = hex.EncodeToString(sum[:8])
	return s
}

func detail(p *Pod) PodDetail {
	d := PodDetail{Name: p.Name, Status: p.Status.Value(), Ready: p.Ready, Restarts: p.Restarts}
	for _, c := range p.Containers {
		d.Containers = append(d.Containers, ContainerDetail{Name: c.Name.Value(), Image: c.Image.Value(), Ready: c.Ready, Restarts: c.Restarts})
	}
	return d
}

var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

// ArtifactName is the DNS-safe form of an image, as in the seed's example
// ("cargo.ayedo.cloud/library/nginx:1.25.3" → "cargo-ayedo-cloud-library-nginx-1-25-3").
func ArtifactName(image string) string {
	name := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(image), "-"), "-")
	if len(name) > 253 {
		name = strings.TrimRight(name[:253], "-")
	}
	return name
}
