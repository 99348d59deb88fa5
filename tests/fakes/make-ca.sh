#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Make a throwaway test CA and a server certificate for the local fake upstreams.
#
#   tests/fakes/make-ca.sh DIR [SUBJECT_ALT_NAMES]
#
# Writes into DIR (created 0755 if missing, so a service account can read ca.pem; the keys are 0600):
#   ca.pem        the CA certificate: give it to the suite as "caFile" and to curl --cacert
#   ca.key        the CA's private key (only needed to sign more certificates)
#   server.pem    a certificate for SUBJECT_ALT_NAMES (an openssl subjectAltName value,
#                 default "DNS:localhost, IP:127.0.0.1"), signed by the CA
#   server.key    its private key
# Keys are P-256, valid for two days: this is test material, never a deployment CA.
set -eu

if [ $# -ne 1 ] && [ $# -ne 2 ]; then
	echo "usage: $0 DIR [SUBJECT_ALT_NAMES]" >&2
	exit 2
fi
dir=$1
san=${2:-DNS:localhost, IP:127.0.0.1}
if [ ! -d "$dir" ]; then
	mkdir -p "$dir"
	chmod 0755 "$dir"
fi
umask 077

# Self-written configs: the distribution's openssl.cnf must not add or change extensions.
cat >"$dir/ca.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
x509_extensions = v3_ca
[dn]
CN = roundtable-sandbox test CA
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
cat >"$dir/server.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
CN = localhost
[v3_server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = $san
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/ca.key" 2>/dev/null
openssl req -new -x509 -config "$dir/ca.cnf" -key "$dir/ca.key" -days 2 -sha256 -out "$dir/ca.pem"

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/server.key" 2>/dev/null
openssl req -new -config "$dir/server.cnf" -key "$dir/server.key" -out "$dir/server.csr"
serial=0x$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -set_serial "$serial" \
	-days 2 -sha256 -extfile "$dir/server.cnf" -extensions v3_server -out "$dir/server.pem" 2>/dev/null
rm -f "$dir/server.csr" "$dir/ca.cnf" "$dir/server.cnf"

# Certificates are public; the daemons' service account must be able to read the CA.
chmod 0644 "$dir/ca.pem" "$dir/server.pem"
openssl verify -CAfile "$dir/ca.pem" "$dir/server.pem" >/dev/null
