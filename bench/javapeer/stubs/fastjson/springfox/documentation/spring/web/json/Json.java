package springfox.documentation.spring.web.json;
/** Compile-time stand-in for springfox; not shipped. */
public class Json { public String value() { throw new UnsupportedOperationException(); } }
