package server

import (
	"bytes"
	_ "embed"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
)

//go:embed openapi.yaml
var openAPI []byte

func (s *Server) handleOpenAPI(c echo.Context) error {
	return serveDocument(c, "application/yaml", openAPI)
}

// serveDocument answers with a document the binary carries, stating its length: net/http drops
// the body of a HEAD answer, and without the length HEAD could not say what GET sends.
func serveDocument(c echo.Context, contentType string, body []byte) error {
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(body)))
	return c.Blob(http.StatusOK, contentType, body)
}

// OpenAPI returns the bot API's OpenAPI document, as served at /api/openapi.yaml.
func OpenAPI() []byte {
	return bytes.Clone(openAPI)
}
