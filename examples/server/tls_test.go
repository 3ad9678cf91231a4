package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
)

// writeCert writes a self-signed ECDSA certificate for 127.0.0.1 and its
// key as PEM files, and returns them with a pool that trusts it.
func writeCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "llama test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestHTTPS runs the binary with --ssl-key-file and --ssl-cert-file: it
// serves HTTPS only, to a client that trusts the certificate, and
// completes; a client that does not trust it is refused.
func TestHTTPS(t *testing.T) {
	model := testenv.Model(t, "stories260K.gguf")
	certFile, keyFile, pool := writeCert(t, t.TempDir())
	base := startServer(t, buildServer(t), "-m", model, "-c", "256", "-np", "1", "-t", "1",
		"--ssl-key-file", keyFile, "--ssl-cert-file", certFile).base
	require.True(t, strings.HasPrefix(base, "https://"), base)

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Post(base+"/completion", "application/json", strings.NewReader(`{"prompt":"Once upon a time","n_predict":8,"temperature":0}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "%s", b)
	assert.Contains(t, string(b), `"content":", there was a little girl`)
	assert.GreaterOrEqual(t, resp.TLS.Version, uint16(tls.VersionTLS12))

	_, err = http.Get(base + "/health")
	assert.Error(t, err, "an untrusted certificate is refused by the client")
	resp, err = http.Get("http://" + strings.TrimPrefix(base, "https://") + "/health")
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP is not served")
	}
}

// TestHTTPSBadFiles checks that bad certificate or key files fail at
// start, before the model loads (no model is given), naming the options.
func TestHTTPSBadFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := writeCert(t, dir)
	otherCert, otherKey, _ := writeCert(t, t.TempDir())
	garbage := filepath.Join(dir, "garbage.pem")
	require.NoError(t, os.WriteFile(garbage, []byte("not PEM"), 0o600))
	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"key only", "", keyFile, "needs both"},
		{"cert only", certFile, "", "needs both"},
		{"missing cert", filepath.Join(dir, "none.pem"), keyFile, "no such file"},
		{"missing key", certFile, filepath.Join(dir, "none.pem"), "no such file"},
		{"cert not PEM", garbage, keyFile, "PEM"},
		{"key not PEM", certFile, garbage, "PEM"},
		{"key of another certificate", certFile, otherKey, "private key does not match"},
		{"key and cert swapped", keyFile, certFile, "--ssl-cert-file"},
		{"other pair is fine", otherCert, otherKey, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.cert != "" {
				args = append(args, "--ssl-cert-file", tc.cert)
			}
			if tc.key != "" {
				args = append(args, "--ssl-key-file", tc.key)
			}
			c, err := parseFlags(args, noEnv, io.Discard)
			require.NoError(t, err)
			conf, err := c.tlsConfig()
			if tc.want == "" {
				require.NoError(t, err)
				assert.Len(t, conf.Certificates, 1)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "--ssl-")
			assert.ErrorContains(t, serve(c), tc.want, "serve fails at start")
		})
	}
}
