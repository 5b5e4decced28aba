package org.javamoney.moneta;
/** Compile-time stand-in for Moneta; not shipped. */
public final class Money {
    public static Money of(java.math.BigDecimal n, javax.money.CurrencyUnit c) { throw new UnsupportedOperationException(); }
    public java.math.BigDecimal getNumberStripped() { throw new UnsupportedOperationException(); }
    public javax.money.CurrencyUnit getCurrency() { throw new UnsupportedOperationException(); }
}
