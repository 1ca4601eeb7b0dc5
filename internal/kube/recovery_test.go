package kube

import (
	"testing"
	"time"
)

func TestRecoveryClosesEveryWaitingChannelOnce(t *testing.T) {
	r := NewRecovery()
	a, b := r.Next(), r.Next()
	select {
	case <-a:
		t.Fatal("closed before Back")
	default:
	}
	r.Back()
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		case <-time.After(time.Second):
			t.Fatal("a channel handed out before Back did not close")
		}
	}
	c := r.Next()
	select {
	case <-c:
		t.Fatal("a channel handed out after Back is closed already")
	default:
	}
	r.Back()
	<-c

	var none *Recovery
	none.Back()
	if none.Next() != nil {
		t.Fatal("a nil Recovery hands out a channel")
	}
}
