"""An outside verifier of Gatehouse session tokens, independent of the platform's code.

    python3 verify_es256_jwt.py JWKS_URL ISSUER AUDIENCE NOW_EPOCH_SECONDS < token

Fetches the JSON Web Key Set (RFC 7517), picks the key named by the token's `kid`,
verifies the ES256 signature (RFC 7518 3.4: R || S over the ASCII signing input) with
the `cryptography` module, and checks `iss`, `aud` and `exp` at NOW (RFC 7519 4.1).
Prints one JSON object: {"ok": true, "kid": ..., "sub": ...} or {"ok": false, "error": ...}.
"""

import base64
import json
import sys
import urllib.request

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verdict(ok, **fields):
    print(json.dumps({"ok": ok, **fields}))
    sys.exit(0)


def main():
    jwks_url, issuer, audience, now = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    token = sys.stdin.read().strip()
    with urllib.request.urlopen(jwks_url, timeout=10) as response:
        jwks = json.load(response)

    parts = token.split(".")
    if len(parts) != 3:
        verdict(False, error="not a compact JWS")
    header = json.loads(b64url(parts[0]))
    if header.get("alg") != "ES256":
        verdict(False, error="alg is not ES256")
    kid = header.get("kid")
    keys = [key for key in jwks.get("keys", []) if key.get("kid") == kid]
    if len(keys) != 1:
        verdict(False, error="no key with this kid in the JWKS", kid=kid)
    jwk = keys[0]
    if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256" or "d" in jwk:
        verdict(False, error="the key is not a public P-256 key", kid=kid)
    public_key = ec.EllipticCurvePublicNumbers(
        int.from_bytes(b64url(jwk["x"]), "big"), int.from_bytes(b64url(jwk["y"]), "big"), ec.SECP256R1()
    ).public_key()

    signature = b64url(parts[2])
    if len(signature) != 64:
        verdict(False, error="the signature is not 64 bytes", kid=kid)
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    try:
        public_key.verify(
            encode_dss_signature(r, s), f"{parts[0]}.{parts[1]}".encode("ascii"), ec.ECDSA(hashes.SHA256())
        )
    except InvalidSignature:
        verdict(False, error="the signature does not verify", kid=kid)

    claims = json.loads(b64url(parts[1]))
    if claims.get("iss") != issuer:
        verdict(False, error="wrong iss", kid=kid)
    if claims.get("aud") != audience:
        verdict(False, error="wrong aud", kid=kid)
    if not isinstance(claims.get("exp"), (int, float)) or claims["exp"] <= now:
        verdict(False, error="expired", kid=kid)
    verdict(True, kid=kid, sub=claims.get("sub"))


main()
