package javax.money;
/** Compile-time stand-in for JavaMoney; not shipped. */
public interface CurrencyUnit { String getCurrencyCode(); }
