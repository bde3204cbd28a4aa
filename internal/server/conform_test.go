package server_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook/webhooktest"
)

// apiRouter finds a request's operation in the OpenAPI document the desk serves, loaded once for
// every test.
var apiRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(server.OpenAPI())
	if err != nil {
		return nil, err
	}
	// The document's server is "/", the desk serving it; a test's desk listens on a port of its own.
	doc.Servers = nil
	return legacy.NewRouter(doc)
})

// conforming is a client whose every answer under /api/ is checked against the OpenAPI document
// with kin-openapi's openapi3filter: its status, headers and body must be ones the document
// describes for that operation, so that the document cannot drift from what the desk answers.
func conforming(t testing.TB) *http.Client {
	return &http.Client{Transport: conformingTransport{t: t, next: http.DefaultTransport}}
}

type conformingTransport struct {
	t    testing.TB
	next http.RoundTripper
}

func (c conformingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, "/api/") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return resp, err
	}
	what := req.Method + " " + req.URL.RequestURI()
	router, err := apiRouter()
	if err != nil {
		c.t.Errorf("load the OpenAPI document: %v", err)
		return resp, nil
	}
	route, params, err := router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrPathNotFound) && resp.StatusCode == http.StatusNotFound,
		errors.Is(err, routers.ErrMethodNotAllowed) && resp.StatusCode == http.StatusMethodNotAllowed:
		// Not an operation of the API, and answered so.
		return resp, nil
	case err != nil:
		c.t.Errorf("%s answered %d, but the OpenAPI document has no such operation: %v", what, resp.StatusCode, err)
		return resp, nil
	}
	err = openapi3filter.ValidateResponse(req.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	if err != nil {
		c.t.Errorf("%s answered what the OpenAPI document does not describe: %.3000s\n%d %v\n%.2000s", what, err, resp.StatusCode, resp.Header, body)
	}
	return resp, nil
}

// conformsAsWebhook fails the test unless a delivery the bot received is what the OpenAPI
// document's handoffEvent webhook describes: its headers and its body.
func conformsAsWebhook(t testing.TB, d webhooktest.Check) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(server.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	hook := doc.Webhooks["handoffEvent"]
	req, err := http.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(d.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = d.Header.Clone()
	err = openapi3filter.ValidateRequest(t.Context(), &openapi3filter.RequestValidationInput{
		Request: req,
		Route:   &routers.Route{Spec: doc, Path: "/hooks", PathItem: hook, Method: http.MethodPost, Operation: hook.Post},
		Options: &openapi3filter.Options{MultiError: true},
	})
	if err != nil {
		t.Errorf("a webhook delivery is not what the OpenAPI document describes: %.3000s\n%v\n%s", err, d.Header, d.Body)
	}
}
