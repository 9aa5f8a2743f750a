import { AuthenticationError, withCause, type PlatformApiError } from './errors.js';

/** An access token and the refresh token that renews it. */
export interface TokenPair {
  /** JWT access token (sent as `Authorization: Bearer …`). */
  token: string;
  /** `rt_…` refresh token: single use, rotated by every refresh. */
  refreshToken: string;
}

/** A pair the API just issued, as `onTokens` receives it. */
export interface IssuedTokens extends TokenPair {
  /** Seconds until `token` expires. */
  expiresIn: number;
}

/** What `auth.refresh` answers, in the API's own field names. */
export interface RefreshResponse {
  token: string;
  refresh_token: string;
  expires_in: number;
}

export interface SessionOptions {
  token?: string | undefined;
  getToken?: (() => string | null | undefined | Promise<string | null | undefined>) | undefined;
  refreshToken?: string | undefined;
  onTokens?: ((tokens: IssuedTokens) => void | Promise<void>) | undefined;
}

/**
 * The client's credentials, and the one place that refreshes them. A call that fails with `TOKEN_EXPIRED` asks for
 * the token that replaces the one it used: calls that failed with the same token share one `auth.refresh`, so the
 * single-use refresh token is presented once (presenting it twice would revoke the session as a reuse).
 */
export class Session {
  #token: string | undefined;
  #refreshToken: string | undefined;
  readonly #getToken: SessionOptions['getToken'];
  readonly #onTokens: SessionOptions['onTokens'];
  readonly #refresh: (refreshToken: string) => Promise<RefreshResponse>;
  /** The last refresh, keyed by the access token it replaces; forgotten when it fails. */
  #lastRefresh: { replaces: string; promise: Promise<string> } | undefined;

  constructor(options: SessionOptions, refresh: (refreshToken: string) => Promise<RefreshResponse>) {
    this.#token = options.token;
    this.#refreshToken = options.refreshToken;
    this.#getToken = options.getToken;
    this.#onTokens = options.onTokens;
    this.#refresh = refresh;
  }

  getTokens(): { token: string | undefined; refreshToken: string | undefined } {
    return { token: this.#token, refreshToken: this.#refreshToken };
  }

  setTokens(tokens: Partial<TokenPair> | null): void {
    this.#token = tokens?.token;
    this.#refreshToken = tokens?.refreshToken;
    this.#lastRefresh = undefined;
  }

  /** Stores a pair the API issued (login) and tells the application. */
  async issued(tokens: IssuedTokens): Promise<void> {
    this.setTokens(tokens);
    await this.#onTokens?.(tokens);
  }

  /** The token to send: the application's (`getToken`) if it keeps them, else the stored one. */
  async accessToken(): Promise<string | undefined> {
    if (this.#getToken) return (await this.#getToken()) ?? undefined;
    return this.#token;
  }

  /**
   * Runs `send` with the current token; on `TOKEN_EXPIRED`, refreshes (once for all calls that used that token)
   * and runs it once more with the new token. `send` rejects with PlatformApiErrors only.
   */
  async authorized<T>(send: (token: string | undefined) => Promise<T>): Promise<T> {
    const token = await this.accessToken();
    try {
      return await send(token);
    } catch (err) {
      const error = err as PlatformApiError;
      if (error.code !== 'TOKEN_EXPIRED' || token === undefined) throw error;
      let fresh: string | undefined;
      try {
        fresh = await this.#replacementFor(token);
      } catch (refreshError) {
        // The refresh token was refused too: the session is over, and the caller's error says why it failed.
        if (refreshError instanceof AuthenticationError) throw withCause(error, refreshError);
        throw refreshError;
      }
      if (fresh === undefined) throw error;
      return send(fresh);
    }
  }

  #replacementFor(expired: string): Promise<string> | undefined {
    if (this.#lastRefresh?.replaces === expired) return this.#lastRefresh.promise;
    const refreshToken = this.#refreshToken;
    if (!refreshToken) return undefined;
    const entry = { replaces: expired, promise: this.#rotate(refreshToken) };
    this.#lastRefresh = entry;
    entry.promise.catch(() => {
      if (this.#lastRefresh === entry) this.#lastRefresh = undefined;
    });
    return entry.promise;
  }

  async #rotate(refreshToken: string): Promise<string> {
    let res: RefreshResponse;
    try {
      res = await this.#refresh(refreshToken);
    } catch (err) {
      // A refused refresh token will not work later either; a network failure might.
      if (err instanceof AuthenticationError && this.#refreshToken === refreshToken) {
        this.#refreshToken = undefined;
      }
      throw err;
    }
    // Unless the application replaced the tokens meanwhile (setTokens, login, logout), the new pair is current.
    if (this.#refreshToken === refreshToken) {
      this.#token = res.token;
      this.#refreshToken = res.refresh_token;
      await this.#onTokens?.({
        token: res.token,
        refreshToken: res.refresh_token,
        expiresIn: res.expires_in,
      });
    }
    return res.token;
  }
}
