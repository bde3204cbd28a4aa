package webhook

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	"code.dny.dev/ssrf"

	"github.com/handoffdesk/desk/internal/desk"
)

// A webhook URL is a request the desk makes on a bot's say-so, so it must not reach into the
// network the desk runs in: its own loopback, the database next door, a cloud metadata service.
// Targets must be public addresses unless the deployment allows private ones
// (WEBHOOK_ALLOW_PRIVATE=1, for local development and tests). Which addresses are public is
// code.dny.dev/ssrf's list, generated from IANA's special-purpose registries.

// allowPrivateHint ends every refusal, so that whoever meets one learns the way round it.
const allowPrivateHint = "webhooks go to public addresses only (WEBHOOK_ALLOW_PRIVATE=1 allows private ones)"

// lookupTimeout bounds the DNS lookup of CheckURL.
const lookupTimeout = 5 * time.Second

func publicOnly() *ssrf.Guardian {
	return ssrf.New(ssrf.WithAnyPort())
}

// httpsOnlyHint ends the refusal of a plain http URL: a webhook carries the package's events and
// its signature, which anyone on the way could read, and the body could be changed on the way.
const httpsOnlyHint = "webhooks use https only (WEBHOOK_ALLOW_PRIVATE=1 also allows http, for local development)"

// CheckURL refuses a webhook URL that the desk would not deliver to: one that is not an absolute
// https URL (http too when allowPrivate), or, unless allowPrivate, one whose host is or resolves
// to an address that is not public. A host that does not resolve now is accepted: its address can
// change before the first delivery anyway, and the deliverer checks the address it dials every
// time.
func CheckURL(ctx context.Context, raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return desk.Errorf(desk.Invalid, "webhook url %q must be an absolute https URL", raw)
	}
	if allowPrivate {
		return nil
	}
	if u.Scheme != "https" {
		return desk.Errorf(desk.Invalid, "webhook url %q: %s", raw, httpsOnlyHint)
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		defer cancel()
		addrs, _ = net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	guard := publicOnly()
	for _, ip := range addrs {
		if guard.SafeAddr(ip) != nil {
			shown := host + " resolves to " + ip.Unmap().String() + ","
			if ip.String() == host {
				shown = host + " is"
			}
			return desk.Errorf(desk.Invalid, "webhook url %q: %s %s address; %s", raw, shown, kind(ip), allowPrivateHint)
		}
	}
	return nil
}

// kind names the sort of address that is not public, for the people who read the refusal.
func kind(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "a loopback"
	case ip.IsPrivate():
		return "a private"
	case ip.IsLinkLocalUnicast():
		return "a link-local"
	case ip.IsMulticast():
		return "a multicast"
	case ip.IsUnspecified():
		return "an unspecified"
	case netip.MustParsePrefix("100.64.0.0/10").Contains(ip):
		return "a carrier-grade NAT"
	default:
		return "a reserved"
	}
}

// refusePrivate is the dialer's Control: it runs on the address a name resolved to, just before
// each connection, so a name that resolves elsewhere by delivery time (DNS rebinding) is refused
// too, and so is every address of a name with several.
func refusePrivate(guard *ssrf.Guardian) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		if err := guard.Safe(network, address, c); err != nil {
			ip, perr := netip.ParseAddrPort(address)
			if perr != nil {
				return err
			}
			return fmt.Errorf("refused %s: %s address; %s", ip.Addr().Unmap(), kind(ip.Addr()), allowPrivateHint)
		}
		return nil
	}
}

// refuseHTTP refuses, at delivery, a plain http URL stored while the deployment allowed it.
func refuseHTTP(u *url.URL) error {
	if u.Scheme != "https" {
		return fmt.Errorf("refused %s: %s", u.Redacted(), httpsOnlyHint)
	}
	return nil
}

// newClient is the deliverer's HTTP client: at most timeout per request, no redirects (a bot's
// endpoint answers itself, and a redirect could point the signed body anywhere), no proxy (the
// address check must see the bot's own address, not a proxy's), and up to maxPerHost kept-alive
// connections per endpoint, as many as it may have requests at once.
func newClient(timeout time.Duration, maxPerHost int, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = refusePrivate(publicOnly())
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:         dialer.DialContext,
			ForceAttemptHTTP2:   true,
			TLSHandshakeTimeout: timeout,
			MaxIdleConns:        0, // no limit across endpoints; each is bounded by MaxIdleConnsPerHost
			MaxIdleConnsPerHost: maxPerHost,
			IdleConnTimeout:     90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
