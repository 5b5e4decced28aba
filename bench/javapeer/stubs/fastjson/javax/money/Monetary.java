package javax.money;
/** Compile-time stand-in for JavaMoney; not shipped. */
public final class Monetary { public static CurrencyUnit getCurrency(String code) { throw new UnsupportedOperationException(); } }
