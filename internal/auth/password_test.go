package auth

import (
	"strings"
	"testing"
)

func TestVerifyPassword(t *testing.T) {
	hash, err := HashPassword("long-enough")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := VerifyPassword("long-enough", hash); !ok || err != nil {
		t.Errorf("VerifyPassword(right password) = %v, %v; want true, nil", ok, err)
	}
	if ok, err := VerifyPassword("wrong", hash); ok || err != nil {
		t.Errorf("VerifyPassword(wrong password) = %v, %v; want false, nil", ok, err)
	}
	// A hash whose key is empty would match every password if its length were taken as given.
	noKey := hash[:strings.LastIndexByte(hash, '$')+1]
	if ok, err := VerifyPassword("anything", noKey); ok || err == nil {
		t.Errorf("VerifyPassword(hash without a key) = %v, %v; want false and an error", ok, err)
	}
}
