// Package clientaddr finds the address a request came from behind trusted proxies, and keys it for
// rate limits without keeping the raw address.
package clientaddr

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Of is the address a request came from: the connection's peer (RemoteAddr), or, when that
// peer is a trusted proxy, the right-most X-Forwarded-For hop that is not a trusted proxy. Hops left
// of it were written by the client and are ignored. The zero Addr means unknown.
func Of(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := parseHop(r.RemoteAddr)
	if !peer.IsValid() || !isTrusted(peer, trusted) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a := parseHop(hops[i])
		if !a.IsValid() {
			return peer // a trusted proxy wrote garbage: fall back to the last trusted hop
		}
		if !isTrusted(a, trusted) {
			return a
		}
		peer = a
	}
	return peer
}

// parseHop reads "ip", "ip:port" or "[ipv6]:port".
func parseHop(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Key is the rate-limit key of a client: a keyed hash of its address, so the raw address is
// never stored or logged. IPv6 clients are keyed by their /64, which one subscriber usually holds
// whole.
func Key(secret []byte, a netip.Addr) string {
	if a.Is6() {
		a = netip.PrefixFrom(a, 64).Masked().Addr()
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(a.String()))
	return "c_" + hex.EncodeToString(m.Sum(nil)[:12])
}

// ParseTrustedProxies reads comma-separated CIDRs or addresses.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, err
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
