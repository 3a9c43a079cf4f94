package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mailsink/mailsink/internal/clientaddr"
)

// Server is a running HTTP listener.
type Server struct {
	srv     *http.Server
	tls     bool
	ln      net.Listener
	log     *slog.Logger
	trusted clientaddr.Trusted
}

// ServerConfig is the HTTP listener's address and timeouts; a zero timeout
// takes the default named beside it.
type ServerConfig struct {
	Addr              string
	ReadHeaderTimeout time.Duration // 10s
	ReadTimeout       time.Duration // 5m
	WriteTimeout      time.Duration // 5m
	IdleTimeout       time.Duration // 2m
	// TrustedProxies are the peers whose X-Forwarded-For names the client.
	TrustedProxies clientaddr.Trusted
	// TLS, when not nil, makes the listener HTTPS (HTTP/2 included).
	TLS *tls.Config
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// NewServer returns a Server for handler, with timeouts that keep a slow or
// idle client from holding a connection forever. Every request is logged in
// one line.
func NewServer(cfg ServerConfig, handler http.Handler, log *slog.Logger) *Server {
	s := &Server{log: log, trusted: cfg.TrustedProxies, tls: cfg.TLS != nil}
	s.srv = &http.Server{
		Addr:              cfg.Addr,
		Handler:           s.logRequests(handler),
		ReadHeaderTimeout: orDefault(cfg.ReadHeaderTimeout, 10*time.Second),
		ReadTimeout:       orDefault(cfg.ReadTimeout, 5*time.Minute),
		WriteTimeout:      orDefault(cfg.WriteTimeout, 5*time.Minute),
		IdleTimeout:       orDefault(cfg.IdleTimeout, 2*time.Minute),
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		TLSConfig:         cfg.TLS,
	}
	return s
}

// Start listens and serves in the background; a bind error is returned at once.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.srv.Addr)
	if err != nil {
		return err
	}
	s.ln = ln
	go func() {
		serve := s.srv.Serve
		if s.tls {
			// The certificate comes from TLSConfig (GetCertificate).
			serve = func(ln net.Listener) error { return s.srv.ServeTLS(ln, "", "") }
		}
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	}()
	return nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops accepting and waits for in-flight requests until ctx is
// done, then closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	return err
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers flush through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequests logs one line per request, with a request id that is also
// returned in X-Request-Id. Keys and bodies are never logged.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		client := s.trusted.FromForwarded(r.RemoteAddr, r.Header.Values("X-Forwarded-For"))
		r = r.WithContext(clientaddr.WithClient(r.Context(), client))
		// Below the info level the line is not written: build nothing for
		// it (the attributes cost about 20 allocations per request).
		if !s.log.Enabled(r.Context(), slog.LevelInfo) {
			next.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		attrs := []any{"id", id, "method", r.Method, "path", r.URL.Path, "status", rec.status, "bytes", rec.bytes,
			"duration", time.Since(start).Round(time.Microsecond), "remote", client}
		if client != clientaddr.Host(r.RemoteAddr) {
			attrs = append(attrs, "proxy", r.RemoteAddr)
		}
		s.log.Info("http request", attrs...)
	})
}

func newRequestID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
