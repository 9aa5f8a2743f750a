import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { AppError, invalidAccessToken, tokenExpired } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { resolveGeneratedSecret } from '../lib/secret-file.js';

export const ACCESS_TOKEN_TTL_SECONDS = 3600;
export const REFRESH_TOKEN_TTL_MS = 30 * 86_400_000;
export const JWT_ISSUER = 'cloud-platform-api';
export const JWT_AUDIENCE = 'cloud-platform-api';

export interface AccessClaims {
  sub: string;
  org: string;
  sid: string;
  jti: string;
  iat: number;
  exp: number;
}

/** Signs and verifies access tokens. The key object is made once: verifying with a string key is much slower. */
export class TokenService {
  private readonly key: KeyObject;
  constructor(secret: string) {
    this.key = createSecretKey(Buffer.from(secret, 'utf8'));
  }

  sign(
    claims: { sub: string; org: string; sid: string },
    nowSeconds = Math.floor(Date.now() / 1000),
  ): string {
    return jwt.sign({ org: claims.org, sid: claims.sid, iat: nowSeconds }, this.key, {
      algorithm: 'HS256',
      expiresIn: ACCESS_TOKEN_TTL_SECONDS,
      issuer: JWT_ISSUER,
      audience: JWT_AUDIENCE,
      subject: claims.sub,
      jwtid: newId('req').replace(/^req_/, 'jti_'),
    });
  }

  /**
   * A signature for a link that needs no bearer token (an invoice's page and PDF): HMAC-SHA256, base64url, of
   * `data` under a key derived from the same secret for `purpose`, so that no signature serves two purposes.
   */
  signLink(purpose: string, data: string): string {
    const key = createHmac('sha256', this.key).update(`link:${purpose}`).digest();
    return createHmac('sha256', key).update(data).digest('base64url');
  }

  /** Whether `signature` is signLink(purpose, data), compared in constant time. */
  verifyLink(purpose: string, data: string, signature: string): boolean {
    const expected = Buffer.from(this.signLink(purpose, data));
    const given = Buffer.from(signature);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  /**
   * Throws AppError UNAUTHORIZED or TOKEN_EXPIRED. `now` is the clock expiry is checked against. Every claim the
   * server signs is required, `exp` and `iat` included.
   */
  verify(token: string, now: Date = new Date()): AccessClaims {
    try {
      const payload = jwt.verify(token, this.key, {
        algorithms: ['HS256'],
        issuer: JWT_ISSUER,
        audience: JWT_AUDIENCE,
        clockTimestamp: Math.floor(now.getTime() / 1000),
      });
      if (
        typeof payload !== 'object' ||
        typeof payload.sub !== 'string' ||
        typeof payload.org !== 'string' ||
        typeof payload.sid !== 'string' ||
        typeof payload.jti !== 'string' ||
        // jsonwebtoken checks `exp` only when present: a token without one would never lapse.
        typeof payload.exp !== 'number' ||
        typeof payload.iat !== 'number'
      ) {
        throw invalidAccessToken();
      }
      return payload as AccessClaims;
    } catch (err) {
      if (err instanceof AppError) throw err;
      if (err instanceof jwt.TokenExpiredError) throw tokenExpired();
      throw invalidAccessToken();
    }
  }
}

/**
 * The JWT secret: the configured one, else (outside production) one generated once into DATA_DIR so that tokens
 * survive restarts.
 */
export function resolveJwtSecret(configured: string | undefined, dataDir: string): string {
  return resolveGeneratedSecret('jwt-secret', configured, dataDir);
}
