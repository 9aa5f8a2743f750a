// Test tier: unit
import { expect } from 'chai';
import { addMonthsClamped, periodEndAfter } from '../../../server/modules/billing/billing-period.js';
import {
  divRoundHalfUp,
  prorate,
  prorationFor,
  taxCents,
  toUnits,
} from '../../../server/modules/billing/money.js';

const DAY = 86_400_000;

describe('billing money: integer cents, proration to the second, half up per line', () => {
  it('rounds halves up (away from zero on the magnitude)', () => {
    expect(divRoundHalfUp(5, 2)).to.equal(3);
    expect(divRoundHalfUp(7, 2)).to.equal(4);
    expect(divRoundHalfUp(4, 3)).to.equal(1);
    expect(divRoundHalfUp(-5, 2)).to.equal(-3);
    expect(divRoundHalfUp(-4, 3)).to.equal(-1);
    expect(divRoundHalfUp(0, 7)).to.equal(0);
  });

  it('shows cents as units with at most two decimals', () => {
    expect(toUnits(7900)).to.equal(79);
    expect(toUnits(2633)).to.equal(26.33);
    expect(toUnits(-1)).to.equal(-0.01);
    for (let c = -1000; c <= 100_000; c += 7) {
      expect(String(toUnits(c))).to.match(/^-?\d+(\.\d{1,2})?$/);
    }
  });

  it('taxes amount × rate / 100, rounded half up', () => {
    expect(taxCents(7900, 0)).to.equal(0);
    expect(taxCents(7900, 20)).to.equal(1580);
    expect(taxCents(2633, 8.875)).to.equal(234); // 233.67875
    expect(taxCents(4, 12.5)).to.equal(1); // 0.5 → 1
    expect(taxCents(-4, 12.5)).to.equal(-1);
  });

  for (const days of [28, 29, 30, 31]) {
    describe(`a period of ${days} days`, () => {
      const start = new Date('2026-02-01T00:00:00.000Z');
      const end = new Date(start.getTime() + days * DAY);
      const total = days * 86_400;

      it('at the first second: the whole old price credited, the whole new price charged', () => {
        const up = prorationFor(2900, 7900, { start, end }, start);
        expect(up).to.deep.equal({
          creditCents: -2900,
          chargeCents: 7900,
          remainingSeconds: total,
          periodSeconds: total,
        });
        const down = prorationFor(7900, 2900, { start, end }, start);
        expect(down.creditCents + down.chargeCents).to.equal(-5000);
      });

      it('in the middle: half of each, half up per line', () => {
        const mid = new Date(start.getTime() + (days * DAY) / 2);
        const up = prorationFor(2900, 7900, { start, end }, mid);
        expect(up.creditCents).to.equal(-1450);
        expect(up.chargeCents).to.equal(3950);
        const down = prorationFor(19900, 7900, { start, end }, mid);
        expect(down.creditCents).to.equal(-9950);
        expect(down.chargeCents).to.equal(3950);
      });

      it('at the last second: one second of each (a cent or nothing)', () => {
        const last = new Date(end.getTime() - 1000);
        const up = prorationFor(2900, 19900, { start, end }, last);
        expect(up.remainingSeconds).to.equal(1);
        expect(up.creditCents).to.equal(-prorate(2900, 1, total));
        expect(up.chargeCents).to.equal(prorate(19900, 1, total));
        expect(up.chargeCents).to.equal(0); // 19900 / 2.4M s < half a cent
        // A started second counts as used: just before the end nothing is left.
        expect(
          prorationFor(2900, 7900, { start, end }, new Date(end.getTime() - 1)).remainingSeconds,
        ).to.equal(0);
        expect(prorationFor(2900, 7900, { start, end }, end)).to.deep.include({
          creditCents: 0,
          chargeCents: 0,
        });
      });

      it('one third in: exact rational amounts rounded half up', () => {
        const at = new Date(start.getTime() + Math.floor(total / 3) * 1000);
        const p = prorationFor(2900, 7900, { start, end }, at);
        expect(p.chargeCents).to.equal(divRoundHalfUp(7900 * p.remainingSeconds, total));
        expect(p.creditCents).to.equal(-divRoundHalfUp(2900 * p.remainingSeconds, total));
      });
    });
  }

  it('calendar-month periods follow the anchor and clamp to the month end', () => {
    const anchor = new Date('2027-01-31T10:00:00.000Z');
    expect(addMonthsClamped(anchor, 1).toISOString()).to.equal('2027-02-28T10:00:00.000Z');
    expect(addMonthsClamped(anchor, 2).toISOString()).to.equal('2027-03-31T10:00:00.000Z');
    expect(addMonthsClamped(new Date('2028-01-31T00:00:00.000Z'), 1).toISOString()).to.equal(
      '2028-02-29T00:00:00.000Z',
    );
    const p = { months: 1 };
    expect(periodEndAfter(p, anchor, anchor).toISOString()).to.equal('2027-02-28T10:00:00.000Z');
    expect(periodEndAfter(p, anchor, new Date('2027-02-28T10:00:00.000Z')).toISOString()).to.equal(
      '2027-03-31T10:00:00.000Z',
    );
    expect(periodEndAfter({ ms: 3000 }, anchor, anchor).toISOString()).to.equal('2027-01-31T10:00:03.000Z');
  });
});
