// Test tier: unit
import { expect } from 'chai';
import { runBuildCommand } from '../../../server/modules/hosting/build-process.js';
import { secretMasker } from '../../../server/modules/hosting/secret-masker.js';

/** What masking of a build's log catches (docs/security.md, "Build logs"). */

const SECRET = 'tok-secret-4242-abcdef';
/** Its base64 has `+` and `/`, so that the URL-safe form differs from the standard one. */
const PUNCTUATED = 'pass>>>???word~~~';

/** What remains of a secret after masking an encoded text: decoded again, the secret must not be in it. */
function decodedAfterMasking(masked: string, encoding: 'base64' | 'base64url' | 'hex'): string {
  // A masked stretch decodes to something else than the secret whatever stands for it.
  const filler = encoding === 'hex' ? '0' : 'A';
  return Buffer.from(masked.replace(/\*/g, filler), encoding).toString('latin1');
}

describe('Hosting: masking of variable values in build logs', () => {
  it('masks a value as it is, longest first, and leaves values shorter than 4 characters alone', () => {
    const mask = secretMasker([SECRET, 'tok-secret', 'abc']);
    expect(mask(`token=${SECRET}; short abc`)).to.equal('token=****; short abc');
    expect(mask('prefix tok-secret only')).to.equal('prefix **** only');
  });

  for (const [secret, name] of [
    [SECRET, 'letters and digits'],
    [PUNCTUATED, 'a value whose base64 has + and /'],
    ['clé-secrète-ünïcode', 'a non-ASCII value'],
  ] as const) {
    describe(name, () => {
      const mask = secretMasker([secret]);

      for (const prefix of ['', 'x', 'xy', 'xyz']) {
        for (const encoding of ['base64', 'base64url'] as const) {
          it(`masks its ${encoding} form inside longer data starting at offset ${prefix.length} (mod 3: ${prefix.length % 3})`, () => {
            const encoded = Buffer.from(`${prefix}${secret}tail`).toString(encoding);
            const masked = mask(`value: ${encoded} end`);
            expect(masked).to.include('****');
            expect(masked.startsWith('value: ')).to.equal(true);
            expect(decodedAfterMasking(masked.slice(7, -4), encoding)).not.to.include(
              Buffer.from(secret).toString('latin1'),
            );
          });
        }
      }

      it('masks its base64 form alone (padding included)', () => {
        const masked = mask(Buffer.from(secret).toString('base64'));
        expect(masked).to.match(/^\*\*\*\*[A-Za-z0-9+/=]{0,3}$/);
      });

      it('masks its hex form, lower and upper case', () => {
        const hex = Buffer.from(secret).toString('hex');
        expect(mask(`h=${hex};`)).to.equal('h=****;');
        expect(mask(`H=${hex.toUpperCase()};`)).to.equal('H=****;');
      });
    });
  }

  it('masks a value split by line breaks within the text masked at once, keeping the lines', () => {
    const mask = secretMasker([SECRET]);
    expect(mask(`a ${SECRET.slice(0, 7)}\n${SECRET.slice(7)} b`)).to.equal('a ****\n**** b');
    expect(mask(`a ${SECRET.slice(0, 3)}\r\n${SECRET.slice(3, 9)}\n\n${SECRET.slice(9)}`)).to.equal(
      'a ****\r\n****\n\n****',
    );
    // As `base64` prints a long value: wrapped at 76 characters.
    const long = `${SECRET}-${'0123456789'.repeat(8)}`;
    const wrapped = Buffer.from(long).toString('base64').replace(/.{76}/g, '$&\n');
    const masked = mask(wrapped);
    expect(masked.split('\n')).to.have.length(wrapped.split('\n').length);
    expect(decodedAfterMasking(masked.replace(/\n/g, ''), 'base64')).not.to.include(SECRET);
  });

  it('masks each line of a multi-line value wherever it appears, and the value whole', () => {
    const value = 'first-line-of-key\nsecond-line-of-key';
    const mask = secretMasker([value]);
    expect(mask('x second-line-of-key y')).to.equal('x **** y');
    expect(mask(`k=${value}`)).to.equal('k=****\n****');
    expect(mask(`k=${value.replace('\n', '\r\n')}`)).to.equal('k=****\r\n****');
  });

  it('does not mask encoded forms too short to tell from ordinary text', () => {
    // "abcd" is YWJjZA== in base64: its fragments at offsets 1 and 2 are 4 characters or fewer.
    const mask = secretMasker(['abcd']);
    expect(mask('abcd')).to.equal('****');
    expect(mask('ordinary words, YWJj and 61626364')).to.equal('ordinary words, YWJj and ****');
  });

  describe('in the output of a command (build-process.ts)', () => {
    async function linesOf(script: string, secrets: string[]): Promise<string[]> {
      const lines: string[] = [];
      const r = await runBuildCommand({
        argv: ['/bin/sh', '-c', script],
        cwd: '/',
        env: { PATH: '/usr/bin:/bin' },
        timeoutMs: 10_000,
        signal: new AbortController().signal,
        maxOutputBytes: 1024 * 1024,
        mask: secretMasker(secrets),
        onLine: (_, line) => lines.push(line),
      });
      expect(r.outcome).to.equal('exited');
      return lines;
    }

    it('masks a value split by a line break within one chunk of output', async () => {
      const lines = await linesOf(`printf 'a ${SECRET.slice(0, 5)}\\n${SECRET.slice(5)} b\\n'`, [SECRET]);
      expect(lines).to.deep.equal(['a ****', '**** b']);
    });

    it('masks a value split between the unfinished line of one chunk and the next chunk', async () => {
      const lines = await linesOf(
        `printf 'a ${SECRET.slice(0, 5)}'; sleep 0.3; printf '${SECRET.slice(5)} b\\n'`,
        [SECRET],
      );
      expect(lines).to.deep.equal(['a **** b']);
    });

    it('masks the base64 and hex forms a build prints with the usual tools', async () => {
      const printed = await linesOf(
        `printf '%s' '${SECRET}' | base64; printf '%s' '${SECRET}' | od -An -tx1 | tr -d ' \\n'; echo`,
        [SECRET],
      );
      expect(printed).to.have.length(2);
      expect(printed[0]).to.match(/^\*\*\*\*[A-Za-z0-9+/=]{0,3}$/);
      expect(printed[1]).to.equal('****');
    });
  });
});
