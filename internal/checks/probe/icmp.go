package probe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

// ICMPMode says how echo requests are sent.
type ICMPMode string

// ICMP modes: auto tries an unprivileged ping socket (Linux: the group must be in
// net.ipv4.ping_group_range), then a raw socket (needs CAP_NET_RAW).
const (
	ICMPAuto         ICMPMode = ""
	ICMPUnprivileged ICMPMode = "unprivileged"
	ICMPRaw          ICMPMode = "raw"
)

// ICMPPackets is how many echo requests one check sends.
const ICMPPackets = 3

// listenICMP opens the socket (a variable for tests of hosts that permit neither).
var listenICMP = func(network, addr string) (*icmp.PacketConn, error) { return icmp.ListenPacket(network, addr) }

// checkICMP sends ICMPPackets echo requests, spec.icmp.interval apart, each
// waiting spec.icmp.timeout for its reply: rtt min/avg/max and loss. The check
// fails when every packet is lost; a host that permits neither socket kind gives
// a configuration error (icmp_not_permitted), not a crash.
func (p *Prober) checkICMP(ctx context.Context, t Target) Outcome {
	var out Outcome
	s := t.Spec.ICMP
	if s == nil {
		s = &polycrate.ICMPSpec{}
	}
	timeout := DefaultICMPTimeout
	if s.Timeout > 0 {
		timeout = time.Duration(s.Timeout * float64(time.Second))
	}
	spacing := time.Second
	if s.Interval > 0 {
		spacing = min(time.Duration(s.Interval*float64(time.Second)), 10*time.Second)
	}
	r := &out.Result
	ip, err := p.resolveIP(ctx, t.Address)
	if err != nil {
		out.Failure = classify(err)
		return out
	}
	r.ResolvedIP = polycrate.Ptr(ip.String())
	conn, raw, err := p.openICMP(ip.To4() != nil)
	if err != nil {
		out.Failure = err.(*Failure) //nolint:errorlint // openICMP returns *Failure
		return out
	}
	defer func() { _ = conn.Close() }()
	if s.TTL > 0 {
		if ip.To4() != nil {
			_ = conn.IPv4PacketConn().SetTTL(s.TTL)
		} else {
			_ = conn.IPv6PacketConn().SetHopLimit(s.TTL)
		}
	}
	var dst net.Addr = &net.UDPAddr{IP: ip}
	if raw {
		dst = &net.IPAddr{IP: ip}
	}
	id, seq0 := rand.IntN(0xffff), rand.IntN(0xffff-ICMPPackets)
	var rtts []time.Duration
	sent := 0
	for i := 0; i < ICMPPackets; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(spacing):
			}
		}
		if ctx.Err() != nil {
			break
		}
		rtt, err := echo(ctx, conn, dst, ip.To4() != nil, raw, id, seq0+i, timeout)
		sent++
		if err != nil {
			var f *Failure
			if errors.As(err, &f) {
				out.Failure = f
				break
			}
			continue // lost
		}
		rtts = append(rtts, rtt)
	}
	icmpFigures(r, sent, rtts)
	if out.Failure == nil && len(rtts) == 0 {
		out.Failure = fail(ErrPacketLoss, fmt.Sprintf("no reply to %d echo requests", sent))
	}
	return out
}

// resolveIP resolves a check's address, an IPv4 address first.
func (p *Prober) resolveIP(ctx context.Context, address string) (net.IP, error) {
	resolver := p.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	ips, err := resolver.LookupIPAddr(ctx, address)
	if err != nil {
		return nil, err
	}
	ip := ips[0].IP
	for _, a := range ips {
		if a.IP.To4() != nil {
			ip = a.IP
			break
		}
	}
	return ip, nil
}

// icmpFigures are the packets sent and received, the loss and the round-trip
// times min/avg/max of an ICMP check.
func icmpFigures(r *polycrate.CheckResult, sent int, rtts []time.Duration) {
	r.ICMPPacketsSent, r.ICMPPacketsReceived = polycrate.Ptr(sent), polycrate.Ptr(len(rtts))
	if sent > 0 {
		r.ICMPPacketLossPercent = polycrate.Ptr(100 * float64(sent-len(rtts)) / float64(sent))
	}
	if len(rtts) > 0 {
		lo, hi, sum := rtts[0], rtts[0], time.Duration(0)
		for _, d := range rtts {
			lo, hi, sum = min(lo, d), max(hi, d), sum+d
		}
		ms := func(d time.Duration) *float64 { return polycrate.Ptr(float64(d.Microseconds()) / 1000) }
		r.ICMPMinRTTMS, r.ICMPMaxRTTMS, r.ICMPRTTMS = ms(lo), ms(hi), ms(sum/time.Duration(len(rtts)))
	}
}

// openICMP opens an ICMP socket as the mode allows; raw says it is a raw socket.
func (p *Prober) openICMP(v4 bool) (*icmp.PacketConn, bool, error) {
	unpriv, rawNet, addr := "udp4", "ip4:icmp", "0.0.0.0"
	if !v4 {
		unpriv, rawNet, addr = "udp6", "ip6:ipv6-icmp", "::"
	}
	var errs []error
	if p.ICMP != ICMPRaw {
		c, err := listenICMP(unpriv, addr)
		if err == nil {
			return c, false, nil
		}
		errs = append(errs, fmt.Errorf("unprivileged ping socket: %w", err))
	}
	if p.ICMP != ICMPUnprivileged {
		c, err := listenICMP(rawNet, addr)
		if err == nil {
			return c, true, nil
		}
		errs = append(errs, fmt.Errorf("raw socket: %w", err))
	}
	joined := errors.Join(errs...)
	if errors.Is(joined, syscall.EPERM) || errors.Is(joined, syscall.EACCES) || errors.Is(joined, os.ErrPermission) {
		return nil, false, fail(ErrNotPermitted, joined.Error()+" (allow the group in net.ipv4.ping_group_range, or grant NET_RAW: docs/monitoring.md)")
	}
	return nil, false, fail(ErrNotPermitted, joined.Error())
}

// echo sends one echo request and waits for its reply.
func echo(ctx context.Context, conn *icmp.PacketConn, dst net.Addr, v4, raw bool, id, seq int, timeout time.Duration) (time.Duration, error) {
	var typ icmp.Type = ipv4.ICMPTypeEcho
	proto := 1
	if !v4 {
		typ, proto = ipv6.ICMPTypeEchoRequest, 58
	}
	msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("polycrate-operator")}}
	b, err := msg.Marshal(nil)
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	start := time.Now()
	if _, err := conn.WriteTo(b, dst); err != nil {
		return 0, classify(err)
	}
	_ = conn.SetReadDeadline(deadline)
	buf := make([]byte, 1500)
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return 0, err // a timeout: this packet is lost
		}
		reply, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil {
			continue
		}
		e, ok := reply.Body.(*icmp.Echo)
		if !ok || (reply.Type != ipv4.ICMPTypeEchoReply && reply.Type != ipv6.ICMPTypeEchoReply) {
			continue
		}
		// An unprivileged socket gets only its own replies (the kernel sets the id);
		// a raw socket sees every reply on the host.
		if e.Seq == seq && (!raw || e.ID == id) {
			return time.Since(start), nil
		}
	}
}
