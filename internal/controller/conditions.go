package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetCondition sets a condition and reports whether this is a transition: the
// condition is new, or its status or reason differ from before. prev is a copy of
// the condition as it was (nil when new).
//
// A copy, not meta.FindStatusCondition's pointer: meta.SetStatusCondition
// updates the existing element of the slice in place, so a pointer read before
// the call already shows the new values afterwards and every comparison with it
// says "unchanged" — which silenced every transition event once.
func SetCondition(conds *[]metav1.Condition, c metav1.Condition) (prev *metav1.Condition, transitioned bool) {
	if p := meta.FindStatusCondition(*conds, c.Type); p != nil {
		cp := *p
		prev = &cp
	}
	meta.SetStatusCondition(conds, c)
	return prev, prev == nil || prev.Status != c.Status || prev.Reason != c.Reason
}
