package kube

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// Annotations and labels the operator reads on Pods; every other one is dropped
// from the cache.
const (
	PodAnnotationK8sAppName = "polycrate_k8sapp_name"
	// PodLabelTemplateHash is set by the Deployment controller on its ReplicaSets' Pods.
	PodLabelTemplateHash = "pod-template-hash"
)

// StripPod is the Pod cache's transform: it keeps only what K8sApp discovery reads
// (identity, owner references, the app annotation, the template-hash label,
// container names and images, phase, the Ready condition, container readiness,
// restarts and waiting reasons). A full Pod costs tens of KiB in an informer
// cache; a stripped one a few hundred bytes (BenchmarkStrippedPodCache).
func StripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // tombstones and the like pass through
	}
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Generation: p.Generation, CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
			OwnerReferences: p.OwnerReferences,
		},
	}
	if v, ok := p.Annotations[PodAnnotationK8sAppName]; ok {
		out.Annotations = map[string]string{PodAnnotationK8sAppName: v}
	}
	if v, ok := p.Labels[PodLabelTemplateHash]; ok {
		out.Labels = map[string]string{PodLabelTemplateHash: v}
	}
	out.Spec.Containers = make([]corev1.Container, len(p.Spec.Containers))
	for i, c := range p.Spec.Containers {
		out.Spec.Containers[i] = corev1.Container{Name: c.Name, Image: c.Image}
	}
	out.Status.Phase = p.Status.Phase
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	if len(p.Status.ContainerStatuses) > 0 {
		out.Status.ContainerStatuses = make([]corev1.ContainerStatus, len(p.Status.ContainerStatuses))
		for i, cs := range p.Status.ContainerStatuses {
			s := corev1.ContainerStatus{Name: cs.Name, Ready: cs.Ready, RestartCount: cs.RestartCount}
			if w := cs.State.Waiting; w != nil {
				s.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason}
			}
			out.Status.ContainerStatuses[i] = s
		}
	}
	return out, nil
}

// StripMetadata is the transform of metadata-only informers (Secrets): name,
// namespace, uid, resourceVersion, owners and timestamps; no labels, no
// annotations (kubectl's last-applied annotation of a Secret holds its data) and
// no managedFields.
// Any other object only loses its managedFields.
func StripMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		if o, ok := obj.(metav1.Object); ok && o.GetManagedFields() != nil {
			o.SetManagedFields(nil)
		}
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp, OwnerReferences: m.OwnerReferences,
	}}, nil
}

var _ toolscache.TransformFunc = StripPod
