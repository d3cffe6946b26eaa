# escape=`
ARG WINDOWS_VERSION=ltsc2022
FROM mcr.microsoft.com/windows/servercore:${WINDOWS_VERSION} AS build
RUN powershell -Command `
    Invoke-WebRequest https://example.com/tool.zip -OutFile tool.zip
FROM mcr.microsoft.com/windows/nanoserver:${WINDOWS_VERSION}
COPY --from=build C:\tool C:\tool
