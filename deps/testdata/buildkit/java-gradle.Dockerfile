ARG JDK=21
FROM eclipse-temurin:${JDK}-jdk AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/root/.gradle ./gradlew --no-daemon bootJar

FROM eclipse-temurin:${JDK}-jdk AS layers
COPY --from=build /src/build/libs/app.jar app.jar
RUN java -Djarmode=layertools -jar app.jar extract

FROM eclipse-temurin:${JDK}-jre-alpine
ENV JAVA_OPTS="-XX:MaxRAMPercentage=75 $JAVA_OPTS"
COPY --from=layers dependencies/ ./
COPY --from=layers spring-boot-loader/ ./
COPY --from=layers application/ ./
