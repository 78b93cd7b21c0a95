//go:build iceberg

package iceberg_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
)

// restServer is an Iceberg REST catalog (https://iceberg.apache.org/rest-catalog-spec/)
// in front of an iceberg-go SQL catalog, serving the subset of the spec
// iceberg-go's REST client calls for what the sink does: the config,
// creating, loading and probing namespaces, creating, loading and probing
// tables, and committing to a table. It keeps no state of its own: every
// request is parsed with iceberg-go's JSON types and handed to the SQL
// catalog, whose answer it returns in the spec's shapes. Any other request
// is outside what the sink needs: it is answered 501, as the spec allows,
// and recorded, and the tests fail if the sink made one (checkServed).
//
// The requests that change the catalog are served one at a time: the SQL
// catalog is a SQLite file, one writer at a time. Writers that use the SQL
// catalog directly still race with them, and lose by the catalog's own
// checks (requirements, compare-and-swap of the metadata location).
type restServer struct {
	*httptest.Server
	cat *sqlcat.Catalog
	// warehouse is the location of the one warehouse served, and
	// warehouseName its name: a client may ask for it by either (the spec's
	// warehouse parameter is a "location or identifier"; Polaris and
	// Lakekeeper know warehouses by name). One asking for another is
	// refused.
	warehouse, warehouseName string

	write sync.Mutex // held while a request changes the catalog

	mu         sync.Mutex
	hits       map[string]int // "<endpoint> <status>": how many answers
	unserved   []string       // requests outside the served endpoints, answered 501
	warehouses []string       // the warehouse parameters of config requests
	// loseAnswer, when set, is asked after each commit the catalog took
	// (the n-th, from 1) whether its answer is lost: the client then gets
	// 504 Gateway Timeout, as from a proxy that timed out while the
	// catalog committed. A fault the test injects, nothing the server does
	// of itself.
	loseAnswer func(n int) bool
	committed  int
}

// The endpoints served, as the config advertises them (the spec's
// "METHOD /v1/{prefix}/path" form); the server has no prefix.
var restEndpoints = []string{
	"GET /v1/{prefix}/namespaces/{namespace}",
	"HEAD /v1/{prefix}/namespaces/{namespace}",
	"POST /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/tables",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
}

// newRESTServer starts a REST catalog server in front of cat, whose
// warehouse is the location warehouse; it stops when the test ends.
func newRESTServer(t testing.TB, cat *sqlcat.Catalog, warehouse string) *restServer {
	t.Helper()
	s := &restServer{cat: cat, warehouse: warehouse, warehouseName: "lake", hits: map[string]int{}}
	mux := http.NewServeMux()
	s.handle(mux, "GET /v1/config", s.config)
	s.handle(mux, "POST /v1/namespaces", s.createNamespace)
	s.handle(mux, "GET /v1/namespaces/{namespace}", s.loadNamespace)
	s.handle(mux, "HEAD /v1/namespaces/{namespace}", s.namespaceExists)
	s.handle(mux, "POST /v1/namespaces/{namespace}/tables", s.createTable)
	s.handle(mux, "GET /v1/namespaces/{namespace}/tables/{table}", s.loadTable)
	s.handle(mux, "HEAD /v1/namespaces/{namespace}/tables/{table}", s.tableExists)
	s.handle(mux, "POST /v1/namespaces/{namespace}/tables/{table}", s.commitTable)
	s.handle(mux, "/", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.unserved = append(s.unserved, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
		restError(w, http.StatusNotImplemented, "UnsupportedOperationException", "%s %s is not implemented by this server", r.Method, r.URL.Path)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// handle registers h for pattern, counting its answers by status.
func (s *restServer) handle(mux *http.ServeMux, pattern string, h http.HandlerFunc) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r)
		s.mu.Lock()
		s.hits[fmt.Sprintf("%s %d", pattern, rec.status)]++
		s.mu.Unlock()
	})
}

// count is how many requests to pattern were answered with status.
func (s *restServer) count(pattern string, status int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[fmt.Sprintf("%s %d", pattern, status)]
}

// summary lists the answers given so far, for logs.
func (s *restServer) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, n := range s.hits {
		out = append(out, fmt.Sprintf("%s: %d", k, n))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// setLoseAnswer sets loseAnswer.
func (s *restServer) setLoseAnswer(f func(n int) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loseAnswer = f
}

// requestedWarehouses returns the warehouse parameters of the config
// requests so far.
func (s *restServer) requestedWarehouses() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.warehouses)
}

// outsideServed returns the requests outside the served endpoints.
func (s *restServer) outsideServed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unserved)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// restError answers the spec's ErrorModel: {"error": {message, type, code}}.
func restError(w http.ResponseWriter, code int, typ, format string, args ...any) {
	type errorModel struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	}
	restWriteJSON(w, code, struct {
		Error errorModel `json:"error"`
	}{errorModel{Message: fmt.Sprintf(format, args...), Type: typ, Code: code}})
}

// restFail answers the error of a catalog call with the status and type the
// spec gives it.
func restFail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable):
		restError(w, http.StatusNotFound, "NoSuchTableException", "%v", err)
	case errors.Is(err, catalog.ErrNoSuchNamespace):
		restError(w, http.StatusNotFound, "NoSuchNamespaceException", "%v", err)
	case errors.Is(err, catalog.ErrTableAlreadyExists), errors.Is(err, catalog.ErrNamespaceAlreadyExists):
		restError(w, http.StatusConflict, "AlreadyExistsException", "%v", err)
	case errors.Is(err, table.ErrCommitFailed):
		restError(w, http.StatusConflict, "CommitFailedException", "%v", err)
	case errors.Is(err, iceberg.ErrInvalidArgument):
		restError(w, http.StatusBadRequest, "BadRequestException", "%v", err)
	default:
		restError(w, http.StatusInternalServerError, "ServiceFailureException", "%v", err)
	}
}

func restWriteJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		restError(w, http.StatusInternalServerError, "ServiceFailureException", "encoding the response: %v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// restDecode reads the request's JSON body into v, answering 400 when it is
// not one.
func restDecode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		restError(w, http.StatusBadRequest, "BadRequestException", "malformed request body: %v", err)
		return false
	}
	if dec.More() {
		restError(w, http.StatusBadRequest, "BadRequestException", "malformed request body: more than one JSON value")
		return false
	}
	return true
}

// restNamespace is the path's namespace: its levels joined by the unit
// separator (0x1F), the spec's default, which the config does not change.
func restNamespace(w http.ResponseWriter, r *http.Request) (table.Identifier, bool) {
	ns := strings.Split(r.PathValue("namespace"), "\x1f")
	if slices.Contains(ns, "") {
		restError(w, http.StatusBadRequest, "BadRequestException", "namespace %q has an empty level", r.PathValue("namespace"))
		return nil, false
	}
	return ns, true
}

// restTableIdent is the path's table identifier.
func restTableIdent(w http.ResponseWriter, r *http.Request) (table.Identifier, bool) {
	ns, ok := restNamespace(w, r)
	if !ok {
		return nil, false
	}
	if r.PathValue("table") == "" {
		restError(w, http.StatusBadRequest, "BadRequestException", "no table name")
		return nil, false
	}
	return append(ns, r.PathValue("table")), true
}

// config: GET /v1/config?warehouse=…, the CatalogConfig. A warehouse other
// than the one served is refused.
func (s *restServer) config(w http.ResponseWriter, r *http.Request) {
	wh := r.URL.Query().Get("warehouse")
	s.mu.Lock()
	s.warehouses = append(s.warehouses, wh)
	s.mu.Unlock()
	if wh != "" && wh != s.warehouseName && !sameLocation(wh, s.warehouse) {
		restError(w, http.StatusBadRequest, "BadRequestException", "unknown warehouse %q: this catalog serves %q (%s)", wh, s.warehouseName, s.warehouse)
		return
	}
	restWriteJSON(w, http.StatusOK, map[string]any{
		"defaults":  iceberg.Properties{},
		"overrides": iceberg.Properties{},
		"endpoints": restEndpoints,
	})
}

// sameLocation says two locations (URLs) name the same place.
func sameLocation(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return a == b
	}
	return ua.Scheme == ub.Scheme && ua.Host == ub.Host && strings.TrimSuffix(ua.Path, "/") == strings.TrimSuffix(ub.Path, "/")
}

// createNamespace: POST /v1/namespaces, CreateNamespaceRequest
// {namespace, properties}; answers CreateNamespaceResponse.
func (s *restServer) createNamespace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Namespace  table.Identifier   `json:"namespace"`
		Properties iceberg.Properties `json:"properties"`
	}
	if !restDecode(w, r, &req) {
		return
	}
	if len(req.Namespace) == 0 || slices.Contains(req.Namespace, "") {
		restError(w, http.StatusBadRequest, "BadRequestException", "invalid namespace %q", req.Namespace)
		return
	}
	s.write.Lock()
	defer s.write.Unlock()
	if err := s.cat.CreateNamespace(r.Context(), req.Namespace, req.Properties); err != nil {
		restFail(w, err)
		return
	}
	props, err := s.cat.LoadNamespaceProperties(r.Context(), req.Namespace)
	if err != nil {
		restFail(w, err)
		return
	}
	restWriteJSON(w, http.StatusOK, map[string]any{"namespace": req.Namespace, "properties": props})
}

// loadNamespace: GET /v1/namespaces/{namespace}, GetNamespaceResponse.
func (s *restServer) loadNamespace(w http.ResponseWriter, r *http.Request) {
	ns, ok := restNamespace(w, r)
	if !ok {
		return
	}
	props, err := s.cat.LoadNamespaceProperties(r.Context(), ns)
	if err != nil {
		restFail(w, err)
		return
	}
	restWriteJSON(w, http.StatusOK, map[string]any{"namespace": ns, "properties": props})
}

// namespaceExists: HEAD /v1/namespaces/{namespace}, 204 or 404.
func (s *restServer) namespaceExists(w http.ResponseWriter, r *http.Request) {
	ns, ok := restNamespace(w, r)
	if !ok {
		return
	}
	exists, err := s.cat.CheckNamespaceExists(r.Context(), ns)
	switch {
	case err != nil:
		restFail(w, err)
	case !exists:
		w.WriteHeader(http.StatusNotFound)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// tableExists: HEAD /v1/namespaces/{namespace}/tables/{table}, 204 or 404.
func (s *restServer) tableExists(w http.ResponseWriter, r *http.Request) {
	ident, ok := restTableIdent(w, r)
	if !ok {
		return
	}
	exists, err := s.cat.CheckTableExists(r.Context(), ident)
	switch {
	case err != nil:
		restFail(w, err)
	case !exists:
		w.WriteHeader(http.StatusNotFound)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// restLoadResult answers the spec's LoadTableResult for tbl. The table's
// files are on a file system the client reaches itself: no config, no
// storage credentials.
func restLoadResult(w http.ResponseWriter, tbl *table.Table) {
	restWriteJSON(w, http.StatusOK, map[string]any{
		"metadata-location": tbl.MetadataLocation(),
		"metadata":          tbl.Metadata(),
		"config":            iceberg.Properties{},
	})
}

// createTable: POST /v1/namespaces/{namespace}/tables, CreateTableRequest.
// The partition spec and the write order are decoded unbound: their source
// ids refer to the request's schema, which the catalog renumbers.
func (s *restServer) createTable(w http.ResponseWriter, r *http.Request) {
	ns, ok := restNamespace(w, r)
	if !ok {
		return
	}
	var req struct {
		Name          string                        `json:"name"`
		Location      string                        `json:"location"`
		Schema        *iceberg.Schema               `json:"schema"`
		PartitionSpec *iceberg.UnboundPartitionSpec `json:"partition-spec"`
		WriteOrder    *table.UnboundSortOrder       `json:"write-order"`
		StageCreate   bool                          `json:"stage-create"`
		Properties    iceberg.Properties            `json:"properties"`
	}
	if !restDecode(w, r, &req) {
		return
	}
	if req.Name == "" || req.Schema == nil {
		restError(w, http.StatusBadRequest, "BadRequestException", "a CreateTableRequest needs a name and a schema")
		return
	}
	if req.StageCreate {
		restError(w, http.StatusNotImplemented, "UnsupportedOperationException", "staged creation is not implemented by this server")
		return
	}
	var opts []catalog.CreateTableOpt
	if req.Location != "" {
		opts = append(opts, catalog.WithLocation(req.Location))
	}
	if req.PartitionSpec != nil {
		opts = append(opts, catalog.WithPartitionSpec(&req.PartitionSpec.PartitionSpec))
	}
	if req.WriteOrder != nil {
		opts = append(opts, catalog.WithSortOrder(req.WriteOrder.SortOrder))
	}
	if req.Properties != nil {
		opts = append(opts, catalog.WithProperties(req.Properties))
	}
	s.write.Lock()
	defer s.write.Unlock()
	tbl, err := s.cat.CreateTable(r.Context(), append(slices.Clone(ns), req.Name), req.Schema, opts...)
	if err != nil {
		restFail(w, err)
		return
	}
	restLoadResult(w, tbl)
}

// loadTable: GET /v1/namespaces/{namespace}/tables/{table}, with all its
// snapshots.
func (s *restServer) loadTable(w http.ResponseWriter, r *http.Request) {
	ident, ok := restTableIdent(w, r)
	if !ok {
		return
	}
	switch mode := r.URL.Query().Get("snapshots"); mode {
	case "", "all":
	case "refs":
		restError(w, http.StatusNotImplemented, "UnsupportedOperationException", "snapshots=refs is not implemented by this server")
		return
	default:
		restError(w, http.StatusBadRequest, "BadRequestException", "snapshots=%q: want all or refs", mode)
		return
	}
	tbl, err := s.cat.LoadTable(r.Context(), ident)
	if err != nil {
		restFail(w, err)
		return
	}
	restLoadResult(w, tbl)
}

// commitTable: POST /v1/namespaces/{namespace}/tables/{table},
// CommitTableRequest {identifier, requirements, updates}. A requirement
// the table's current metadata fails answers 409 CommitFailedException, as
// does losing the catalog's compare-and-swap to another writer; updates
// that do not apply to the table answer 400. The answer is
// CommitTableResponse {metadata-location, metadata}.
func (s *restServer) commitTable(w http.ResponseWriter, r *http.Request) {
	ident, ok := restTableIdent(w, r)
	if !ok {
		return
	}
	var req struct {
		Identifier *struct {
			Namespace table.Identifier `json:"namespace"`
			Name      string           `json:"name"`
		} `json:"identifier"`
		Requirements *table.Requirements `json:"requirements"`
		Updates      *table.Updates      `json:"updates"`
	}
	if !restDecode(w, r, &req) {
		return
	}
	if req.Requirements == nil || req.Updates == nil {
		restError(w, http.StatusBadRequest, "BadRequestException", "a CommitTableRequest needs requirements and updates")
		return
	}
	if id := req.Identifier; id != nil && !slices.Equal(append(slices.Clone(id.Namespace), id.Name), ident) {
		restError(w, http.StatusBadRequest, "BadRequestException", "the request's identifier %v is not the path's table %v", append(id.Namespace, id.Name), ident)
		return
	}
	reqs, updates := []table.Requirement(*req.Requirements), []table.Update(*req.Updates)
	ctx := r.Context()
	s.write.Lock()
	defer s.write.Unlock()
	cur, err := s.cat.LoadTable(ctx, ident)
	creating := slices.ContainsFunc(reqs, func(q table.Requirement) bool { return q.GetType() == "assert-create" })
	if err != nil && (!errors.Is(err, catalog.ErrNoSuchTable) || !creating) {
		restFail(w, err)
		return
	}
	var base table.Metadata
	if cur != nil {
		base = cur.Metadata()
	}
	if err := failedRequirement(reqs, base); err != nil {
		restError(w, http.StatusConflict, "CommitFailedException", "%v", err)
		return
	}
	if cur != nil {
		if _, err := table.UpdateTableMetadata(base, updates, cur.MetadataLocation()); err != nil {
			restError(w, http.StatusBadRequest, "BadRequestException", "the updates do not apply to the table: %v", err)
			return
		}
	}
	meta, loc, err := s.cat.CommitTable(ctx, ident, reqs, updates)
	if err != nil {
		// A writer that bypasses this server may have committed since the
		// check above: the catalog then fails the commit on a requirement
		// (nothing is written) or on its compare-and-swap.
		if now, lerr := s.cat.LoadTable(ctx, ident); lerr == nil && !errors.Is(err, table.ErrCommitFailed) {
			if rerr := failedRequirement(reqs, now.Metadata()); rerr != nil {
				restError(w, http.StatusConflict, "CommitFailedException", "%v", rerr)
				return
			}
		}
		restFail(w, err)
		return
	}
	s.mu.Lock()
	s.committed++
	lost := s.loseAnswer != nil && s.loseAnswer(s.committed)
	s.mu.Unlock()
	if lost {
		restError(w, http.StatusGatewayTimeout, "CommitStateUnknownException", "the answer to a commit the catalog took was lost (injected)")
		return
	}
	restWriteJSON(w, http.StatusOK, map[string]any{"metadata-location": loc, "metadata": meta})
}

// failedRequirement is the error of the first requirement meta (nil: no
// table) fails.
func failedRequirement(reqs []table.Requirement, meta table.Metadata) error {
	for _, q := range reqs {
		if err := q.Validate(meta); err != nil {
			return err
		}
	}
	return nil
}
