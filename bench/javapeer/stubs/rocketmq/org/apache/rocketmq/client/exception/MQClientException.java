package org.apache.rocketmq.client.exception;
/** Compile-time stand-in (rocketmq-client); not shipped. */
public class MQClientException extends Exception { }
