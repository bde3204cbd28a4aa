package main

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestTrustedProxiesParsed(t *testing.T) {
	t.Parallel()
	got, err := parseTrustedProxies(" 10.0.0.0/8, 192.168.1.5 2001:db8::/32,10.1.2.3/16 ::1 ")
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.5/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("::1/128"),
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("parseTrustedProxies = %v, %v; want %v", got, err, want)
	}
	if got, err := parseTrustedProxies(""); err != nil || len(got) != 0 {
		t.Errorf("no TRUSTED_PROXIES = %v, %v; want none", got, err)
	}
	for _, bad := range []string{"proxy.internal", "10.0.0.0/33", "10.0.0.1-10.0.0.9", "fe80::1%eth0"} {
		if _, err := parseTrustedProxies(bad); err == nil || !strings.Contains(err.Error(), "TRUSTED_PROXIES") {
			t.Errorf("TRUSTED_PROXIES=%q: %v, want an error naming the setting", bad, err)
		}
	}
}

func TestServeRefusesBadTrustedProxies(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		return map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8, lb.internal", "ADDR": "127.0.0.1:0",
			"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}[k]
	}
	_, err := runCommand(t, getenv, "serve")
	if err == nil || !strings.Contains(err.Error(), `"lb.internal" is neither an IP address nor a CIDR range`) {
		t.Fatalf("serve with a bad TRUSTED_PROXIES: %v, want an error naming the entry", err)
	}
}
